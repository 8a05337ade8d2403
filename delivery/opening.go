package delivery

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/heraldevents/herald/herr"
)

// Stream opens under load. A reconnect storm (every browser of a
// deployment reconnecting after a restart) asks for thousands of opens at
// once; each open costs store round trips, and queued behind one another
// they pass the clients' own timeouts, which makes the clients retry and
// adds to the storm. So past StreamConfig.MaxOpening opens in progress a
// new one is refused at once, before any backend call, with a Retry-After
// spread over openRetryMin–openRetryMax so that the refused clients come
// back spread out rather than together. Streams already open are never
// ended for it.
const (
	openRetryMin = time.Second
	openRetryMax = 3 * time.Second
)

// OpensShedError is the error of a stream open refused because
// StreamConfig.MaxOpening opens were in progress: herr.Unavailable (HTTP
// 503, gRPC UNAVAILABLE, which the notifications API tells clients to
// retry) with a Retry-After (herr.RetryAfterOf) of 1–3 s.
type OpensShedError struct {
	// RetryAfter is when the client should try again.
	RetryAfter time.Duration
}

func (e *OpensShedError) Error() string {
	return "the server is opening too many streams at once: retry after " + strconv.Itoa(int(e.RetryAfter/time.Second)) + " s"
}

// Unwrap gives the error its herr code, caller-safe message and
// Retry-After.
func (e *OpensShedError) Unwrap() error {
	return herr.WithRetryAfter(herr.New(herr.Unavailable, "%s", e.Error()), e.RetryAfter)
}

// LoadShed marks the error as a refusal under load, an expected answer
// that the transports neither log as a failure nor count as one (Service
// logs the refusals, rate-limited).
func (e *OpensShedError) LoadShed() bool { return true }

// beginOpen takes a place among the opens in progress, or returns the
// refusal when StreamConfig.MaxOpening are in progress; a nil error must
// be followed by endOpen.
func (s *Service) beginOpen(ctx context.Context) error {
	limit := int64(s.cfg.Streams.MaxOpening)
	if limit <= 0 {
		return nil
	}
	if n := s.opening.Add(1); n > limit {
		s.opening.Add(-1)
		s.openShed.Add(1)
		wait := openRetryMin + time.Duration(rand.Int64N(int64(openRetryMax-openRetryMin)/int64(time.Second)+1))*time.Second
		s.warnings.Log(context.WithoutCancel(ctx), s.cfg.Logger, slog.LevelWarn, "stream-opens-shed",
			"stream opens refused with 503 and Retry-After: too many in progress at once", "max_opening", limit)
		return &OpensShedError{RetryAfter: wait}
	}
	return nil
}

func (s *Service) endOpen() { s.opening.Add(-1) }

// OpensShed returns how many stream opens StreamConfig.MaxOpening has
// refused since the Service was made.
func (s *Service) OpensShed() int64 { return s.openShed.Load() }
