package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldevents/herald/leasestore"
)

// ScriptedSource is a leasestore.Source over a fixed, ordered list of
// bodies: a tiny in-process broker that is the store's input in the suite
// (the store itself always runs against a real collection). It hands out
// bodies in order, keeps received ones out of circulation until Settle, puts
// nacked ones back in their original order, counts acks and nacks, and can
// be told to fail. It is safe for concurrent use.
//
// Each Incoming's Handle is the body's index (an int) in the order added.
type ScriptedSource struct {
	mu         sync.Mutex
	msgs       []message
	head       int // every message before head is acked
	acked      int
	nacked     int
	receives   int
	badSettles int
	receiveErr error
	settleErr  error
	onReceive  func()
}

type message struct {
	body      []byte
	published time.Time
	state     msgState
}

type msgState int

const (
	available msgState = iota
	outstanding
	acked
)

// NewScriptedSource returns a source holding bodies, to be received in
// this order.
func NewScriptedSource(bodies ...[]byte) *ScriptedSource {
	s := &ScriptedSource{}
	s.Add(bodies...)
	return s
}

// Add appends bodies, as if they were published now, of unknown publish
// time (Incoming.PublishedAt zero).
func (s *ScriptedSource) Add(bodies ...[]byte) {
	s.AddAt(time.Time{}, bodies...)
}

// AddAt appends bodies published at at: Receive reports it as their
// Incoming.PublishedAt.
func (s *ScriptedSource) AddAt(at time.Time, bodies ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bodies {
		s.msgs = append(s.msgs, message{body: b, published: at})
	}
}

// Receive implements leasestore.Source: it returns up to max available
// bodies, lowest index first, and marks them outstanding. It fails with the
// error given to FailReceive, if any, or with ctx's error.
func (s *ScriptedSource) Receive(ctx context.Context, max int) ([]leasestore.Incoming, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.receives++
	if s.receiveErr != nil {
		err := s.receiveErr
		s.mu.Unlock()
		return nil, err
	}
	var out []leasestore.Incoming
	for i := s.head; i < len(s.msgs) && len(out) < max; i++ {
		if m := &s.msgs[i]; m.state == available {
			m.state = outstanding
			out = append(out, leasestore.Incoming{Body: m.body, Handle: i, PublishedAt: m.published})
		}
	}
	hook := s.onReceive
	s.onReceive = nil
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	return out, nil
}

// Settle implements leasestore.Source: it acks the first taken of in and
// nacks the rest. If FailSettle set an error it returns that error and
// settles nothing, as when the process dies before the broker ack: the
// messages stay outstanding until Redeliver. Settling a message that is not
// outstanding (twice, or never received) is counted by BadSettles.
func (s *ScriptedSource) Settle(_ context.Context, in []leasestore.Incoming, taken int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settleErr != nil {
		return s.settleErr
	}
	if taken < 0 || taken > len(in) {
		s.badSettles++
		return fmt.Errorf("settle: taken %d out of range [0, %d]", taken, len(in))
	}
	var bad error
	for k, e := range in {
		i, ok := e.Handle.(int)
		if !ok || i < 0 || i >= len(s.msgs) || s.msgs[i].state != outstanding {
			s.badSettles++
			bad = errors.Join(bad, fmt.Errorf("settle: handle %v is not outstanding", e.Handle))
			continue
		}
		if k < taken {
			s.msgs[i].state = acked
			s.acked++
		} else {
			s.msgs[i].state = available
			s.nacked++
		}
	}
	for s.head < len(s.msgs) && s.msgs[s.head].state == acked {
		s.msgs[s.head].body = nil // let acked bodies go in long benchmarks
		s.head++
	}
	return bad
}

// FailReceive makes every Receive fail with err until FailReceive(nil).
func (s *ScriptedSource) FailReceive(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.receiveErr = err
}

// FailSettle makes every Settle fail with err, settling nothing, until
// FailSettle(nil).
func (s *ScriptedSource) FailSettle(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleErr = err
}

// OnReceive runs f once, inside the next Receive, after it has taken its
// messages and before it returns them: the moment to let another client
// race the pull that is receiving.
func (s *ScriptedSource) OnReceive(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onReceive = f
}

// Redeliver makes every outstanding message available again, as a broker
// does when the ack deadline of an unsettled message passes. It returns how
// many it put back.
func (s *ScriptedSource) Redeliver() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := s.head; i < len(s.msgs); i++ {
		if s.msgs[i].state == outstanding {
			s.msgs[i].state = available
			n++
		}
	}
	return n
}

// Counts is a snapshot of a ScriptedSource's bookkeeping.
type Counts struct {
	Acked       int // acks so far (each message is acked at most once)
	Nacked      int // nacks so far (a message may be nacked many times)
	Available   int // messages waiting to be received
	Outstanding int // messages received and not settled
	Receives    int // Receive calls
	BadSettles  int // Settle entries for messages that were not outstanding
}

// Counts returns the current counts.
func (s *ScriptedSource) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Counts{Acked: s.acked, Nacked: s.nacked, Receives: s.receives, BadSettles: s.badSettles}
	for i := s.head; i < len(s.msgs); i++ {
		switch s.msgs[i].state {
		case available:
			c.Available++
		case outstanding:
			c.Outstanding++
		}
	}
	return c
}

// IsAcked reports whether the body at index i (in the order added) has been
// acked.
func (s *ScriptedSource) IsAcked(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return i < s.head || s.msgs[i].state == acked
}
