// Package lograte rate-limits repeated log lines: during a broker outage
// every failed publish would otherwise write the same warning, tens of
// thousands of lines a second, burying everything else and costing log
// ingestion money.
//
// A Limiter writes the first line of a key at once and opens a window of
// one interval. Lines of the same key inside the window are counted, not
// written. When the window ends with lines counted, one summary line is
// written (the last counted line's message and attributes, plus
// "suppressed", the count, and "interval") and a new window opens; a
// window that ends with nothing counted closes, and the key's next line is
// written at once again. So a steady failure writes its first line, then
// one summary line per interval.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is the window of a Limiter made with New(0).
const DefaultInterval = 10 * time.Second

// maxKeys bounds the keys a Limiter tracks at once; lines of further keys
// are written unlimited rather than grow memory without bound.
const maxKeys = 1024

// Limiter rate-limits log lines by key. It is safe for concurrent use. The
// zero value is not usable; call New.
type Limiter struct {
	interval time.Duration
	// afterFunc schedules a window's end; tests replace it to end windows
	// by hand.
	afterFunc func(d time.Duration, f func())

	mu    sync.Mutex
	lines map[string]*window
}

// window is one key's open window.
type window struct {
	suppressed int
	// What the summary line writes: the last suppressed line.
	ctx    context.Context
	logger *slog.Logger
	level  slog.Level
	msg    string
	args   []any
}

// New returns a Limiter whose windows last interval (DefaultInterval when
// interval is not positive).
func New(interval time.Duration) *Limiter {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Limiter{
		interval:  interval,
		afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		lines:     map[string]*window{},
	}
}

// Interval is the length of a window.
func (l *Limiter) Interval() time.Duration { return l.interval }

// Log writes msg with args (slog's alternating keys and values, or
// slog.Attr) to logger at level, unless a line of key was written less
// than one interval ago; then it only counts it. key says which lines are
// "the same": the message and whatever distinguishes one failure from
// another (an error's text, say), not what varies per request (ids).
func (l *Limiter) Log(ctx context.Context, logger *slog.Logger, level slog.Level, key, msg string, args ...any) {
	if !logger.Enabled(ctx, level) {
		return
	}
	l.mu.Lock()
	if w, ok := l.lines[key]; ok {
		w.suppressed++
		w.ctx, w.logger, w.level, w.msg, w.args = context.WithoutCancel(ctx), logger, level, msg, args
		l.mu.Unlock()
		return
	}
	if len(l.lines) < maxKeys {
		l.lines[key] = &window{}
		l.afterFunc(l.interval, func() { l.endWindow(key) })
	}
	l.mu.Unlock()
	logger.Log(ctx, level, msg, args...)
}

// endWindow ends key's window: it writes the summary line of what the
// window counted and opens the next window, or forgets the key when the
// window counted nothing.
func (l *Limiter) endWindow(key string) {
	l.mu.Lock()
	w, ok := l.lines[key]
	if !ok {
		l.mu.Unlock()
		return
	}
	if w.suppressed == 0 {
		delete(l.lines, key)
		l.mu.Unlock()
		return
	}
	l.lines[key] = &window{}
	l.afterFunc(l.interval, func() { l.endWindow(key) })
	l.mu.Unlock()
	args := append(append([]any(nil), w.args...), slog.Int("suppressed", w.suppressed), slog.Duration("interval", l.interval))
	w.logger.Log(w.ctx, w.level, w.msg+" (repeated)", args...)
}
