package lograte

import (
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/testkit"
)

// manual is a Limiter whose windows end only when the test says so.
type manual struct {
	*Limiter
	mu      sync.Mutex
	pending []func()
}

func newManual() *manual {
	m := &manual{Limiter: New(time.Hour)}
	m.afterFunc = func(_ time.Duration, f func()) {
		m.mu.Lock()
		m.pending = append(m.pending, f)
		m.mu.Unlock()
	}
	return m
}

// endWindows ends every window open now.
func (m *manual) endWindows() {
	m.mu.Lock()
	fs := m.pending
	m.pending = nil
	m.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// sink is a logger's output that the test reads line by line.
type sink struct{ testkit.SyncBuffer }

func (s *sink) lines(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.Take()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		out = append(out, m)
	}
	return out
}

func TestRepeatedLinesAreCounted(t *testing.T) {
	t.Parallel()
	var out sink
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	l := newManual()

	// 1000 identical failures from 8 goroutines: one line now.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 125 {
				l.Log(t.Context(), logger, slog.LevelWarn, "publish failed|unreachable", "publish failed", "err", "unreachable", "n", g*125+i)
			}
		}()
	}
	wg.Wait()
	lines := out.lines(t)
	require.Len(t, lines, 1, "the first line is written, the rest counted")
	require.Equal(t, "publish failed", lines[0]["msg"])
	require.NotContains(t, lines[0], "suppressed")

	// Another key is not held back by the first.
	l.Log(t.Context(), logger, slog.LevelWarn, "other", "other failure")
	require.Len(t, out.lines(t), 1)

	// The window ends: one summary line counting the 999 others.
	l.endWindows()
	lines = out.lines(t)
	require.Len(t, lines, 1, "one summary for the key that repeated, none for the one that did not")
	require.Equal(t, "publish failed (repeated)", lines[0]["msg"])
	require.EqualValues(t, 999, lines[0]["suppressed"])
	require.Equal(t, "unreachable", lines[0]["err"])

	// Still failing: a line in the next window is counted too, and
	// summarised at its end.
	l.Log(t.Context(), logger, slog.LevelWarn, "publish failed|unreachable", "publish failed", "err", "unreachable")
	require.Empty(t, out.lines(t))
	l.endWindows()
	lines = out.lines(t)
	require.Len(t, lines, 1)
	require.EqualValues(t, 1, lines[0]["suppressed"])

	// A quiet window closes the key: its next line is written at once.
	l.endWindows()
	require.Empty(t, out.lines(t), "a window that counted nothing writes nothing")
	l.Log(t.Context(), logger, slog.LevelWarn, "publish failed|unreachable", "publish failed", "err", "unreachable")
	lines = out.lines(t)
	require.Len(t, lines, 1)
	require.NotContains(t, lines[0], "suppressed")
}

func TestDisabledLevelIsNotCounted(t *testing.T) {
	t.Parallel()
	var out sink
	logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}))
	l := newManual()
	l.Log(t.Context(), logger, slog.LevelWarn, "k", "warning")
	l.endWindows()
	require.Empty(t, out.lines(t))
	require.Empty(t, l.lines, "nothing tracked for a level the logger drops")
}

func TestKeysAreBounded(t *testing.T) {
	t.Parallel()
	var out sink
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	l := newManual()
	for i := range maxKeys + 10 {
		l.Log(t.Context(), logger, slog.LevelWarn, "key"+strings.Repeat("x", i), "line")
	}
	require.Len(t, l.lines, maxKeys)
	require.Len(t, out.lines(t), maxKeys+10, "past the bound, lines are written unlimited")
}

func TestRealTimer(t *testing.T) {
	t.Parallel()
	var out sink
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	l := New(time.Millisecond)
	l.Log(t.Context(), logger, slog.LevelWarn, "k", "line")
	l.Log(t.Context(), logger, slog.LevelWarn, "k", "line")
	// The summary comes from the timer; wait for it without asserting
	// when.
	var lines []map[string]any
	require.Eventually(t, func() bool {
		lines = append(lines, out.lines(t)...)
		return len(lines) == 2
	}, time.Minute, time.Millisecond)
	require.EqualValues(t, 1, lines[1]["suppressed"])
}
