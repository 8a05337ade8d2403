package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/emulators"
)

// TestKillHubStreams: non-durable SSE streams served by the stream hub of
// one process (docs/streams-at-scale.md) reconnect to another process with
// their reconnect tokens, within the grace window, after the first is
// killed with SIGKILL: each token names the same queue there, and events
// published afterwards reach every stream. One event reaches streams on
// both processes (a load balancer spreads them), each exactly once.
func TestKillHubStreams(t *testing.T) {
	server := emulators.NATS(t)
	stream := "HERALD_HUBKILL_" + randomHex(6)
	t.Cleanup(func() {
		nc, err := nats.Connect(server)
		if err != nil {
			return
		}
		defer nc.Close()
		if js, err := jetstream.New(nc); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = js.DeleteStream(ctx, stream)
		}
	})
	bin := herald(t)
	env := []string{
		"HERALD_DEV_TOKEN=" + killToken,
		"HERALD_TOPIC_URL=" + server + "/" + stream,
		"HERALD_STORE_URL=" + emulators.PostgreSQL(t) + "?table=herald",
		"HERALD_PROCESS_HEARTBEAT=200ms",
		"HERALD_RECONNECT_GRACE=20s",
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	a, b := newProc(t, "herald-A", bin, env), newProc(t, "herald-B", bin, env)
	a.start(ctx)
	b.start(ctx)

	const perProc = 10
	typ := "hubkill." + randomHex(4)
	filters := url.QueryEscape(`[{"event_type":"` + typ + `"}]`)
	var onA, onB []*sseReader
	for range perProc {
		onA = append(onA, openSSE(ctx, t, a.base, "?filter_groups="+filters, ""))
		onB = append(onB, openSSE(ctx, t, b.base, "?filter_groups="+filters, ""))
	}
	publishN := func(base string, from, n int) {
		t.Helper()
		var events []map[string]any
		for i := from; i < from+n; i++ {
			events = append(events, map[string]any{"event_type": typ, "message": map[string]any{"n": i}})
		}
		status, err := call(ctx, base, "POST", "/api/v1beta/events/batch", map[string]any{"events": events}, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
	}
	publishN(a.base, 1, 3)
	for _, s := range append(append([]*sseReader{}, onA...), onB...) {
		require.Equal(t, []int{1, 2, 3}, s.events(t, 3), "one event reaches the streams of both processes, once")
	}

	a.kill()
	for _, s := range onA {
		s.close()
	}
	publishN(b.base, 4, 2)
	// Every stream of the killed process reconnects to the other with its
	// token, within the grace window: the same queue, and new events.
	var moved []*sseReader
	for _, s := range onA {
		r := openSSE(ctx, t, b.base, "", s.token)
		require.Equal(t, s.token, r.token, "the token names the same queue on the other process")
		moved = append(moved, r)
	}
	publishN(b.base, 6, 2)
	for _, s := range moved {
		got := s.events(t, 2)
		// What the killed process held for the queue is gone with it; what
		// was published after it died and before the reconnect may have
		// been taken in by the new home's hub (4, 5) or not.
		require.Subset(t, []int{4, 5, 6, 7}, got)
		for len(got) == 0 || got[len(got)-1] != 7 {
			got = append(got, s.events(t, 1)...)
		}
		require.Equal(t, 7, got[len(got)-1])
	}
	for _, s := range onB {
		require.Equal(t, []int{4, 5, 6, 7}, s.events(t, 4), "the streams of the live process lose nothing")
	}
}

// sseReader is an open SSE stream.
type sseReader struct {
	token  string
	cancel context.CancelFunc
	frames chan sseEvent
}

type sseEvent struct {
	event, data string
}

// openSSE opens GET /api/v1beta/events/stream on base with query, or with
// token as Last-Event-ID, and reads its connected frame.
func openSSE(ctx context.Context, t *testing.T, base, query, token string) *sseReader {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(sctx, "GET", base+"/api/v1beta/events/stream"+query, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+killToken)
	if token != "" {
		req.Header.Set("Last-Event-ID", token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	s := &sseReader{cancel: cancel, frames: make(chan sseEvent, 100)}
	go func() {
		defer res.Body.Close()
		defer close(s.frames)
		sc := bufio.NewScanner(res.Body)
		var ev string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				select {
				case s.frames <- sseEvent{ev, strings.TrimPrefix(line, "data: ")}:
				case <-sctx.Done():
					return
				}
			}
		}
	}()
	f := s.next(t)
	require.Equal(t, "connected", f.event)
	var c struct {
		ReconnectToken string `json:"reconnect_token"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.data), &c))
	s.token = c.ReconnectToken
	return s
}

func (s *sseReader) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case f, ok := <-s.frames:
		require.True(t, ok, "the stream ended")
		return f
	case <-time.After(15 * time.Second):
		t.Fatal("no frame arrived")
	}
	return sseEvent{}
}

// events reads n events and returns their "n" members.
func (s *sseReader) events(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	for len(out) < n {
		f := s.next(t)
		require.Equal(t, "event", f.event, "frame %s: %s", f.event, f.data)
		var e struct {
			Message struct {
				N int `json:"n"`
			} `json:"message"`
		}
		require.NoError(t, json.Unmarshal([]byte(f.data), &e))
		out = append(out, e.Message.N)
	}
	return out
}

func (s *sseReader) close() { s.cancel() }
