//go:build !herald_aws && !herald_gcp

package storeurl_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/heraldevents/herald/leasestore"
)

// source is a tiny in-process broker side for leasestore.Pull: a FIFO of
// bodies. Receive takes from the head; Settle acks the taken ones and puts
// the rest back at the head in order. It is safe for concurrent use, so
// several Stores may pull from it at once.
type source struct {
	mu      sync.Mutex
	queue   [][]byte
	out     int // received and not yet settled
	acked   int
	settles int
}

// newSource returns a source holding bodies.
func newSource(bodies ...[]byte) *source {
	return &source{queue: slices.Clone(bodies)}
}

// numbered returns n distinct small bodies "event-0" … "event-(n-1)".
func numbered(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"id":"event-%d"}`, i)
	}
	return out
}

func (s *source) Receive(_ context.Context, max int) ([]leasestore.Incoming, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(max, len(s.queue))
	in := make([]leasestore.Incoming, n)
	for i := range in {
		in[i] = leasestore.Incoming{Body: s.queue[i]}
	}
	s.queue = s.queue[n:]
	s.out += n
	return in, nil
}

func (s *source) Settle(_ context.Context, in []leasestore.Incoming, taken int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	back := make([][]byte, 0, len(in)-taken+len(s.queue))
	for _, e := range in[taken:] {
		back = append(back, e.Body)
	}
	s.queue = append(back, s.queue...)
	s.out -= len(in)
	s.acked += taken
	s.settles++
	return nil
}

// state returns how many bodies are queued, received and unsettled, and
// acked.
func (s *source) state() (queued, out, acked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue), s.out, s.acked
}
