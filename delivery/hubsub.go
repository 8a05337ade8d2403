package delivery

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

// The hub subscription exists only while the process has queues (and a
// while after, so that a client reconnecting does not churn it), so a
// process serving no stream pays its broker nothing. Where filter updates
// are cheap (pubsubx.Broker.CheapFilterUpdates) it takes only the event
// types its queues read; elsewhere every event. One goroutine (subLoop)
// makes every change, so creations, updates and deletions never race.

// Hub subscription bounds.
const (
	// hubSubLinger is how long the subscription outlives the process's
	// last queue.
	hubSubLinger = time.Minute
	// maxHubTypes is the most event types the subscription's filter names;
	// past it, it takes every event.
	maxHubTypes = 100
	// hubCoverWait bounds how long opening a stream waits for the
	// subscription to take its event types.
	hubCoverWait = 10 * time.Second
)

// hubSub is what the hub knows of its subscription. subLoop changes it;
// others read it under mu.
type hubSub struct {
	mu     sync.Mutex
	exists bool
	all    bool            // it takes every event
	types  map[string]bool // else these event types
	// want counts the coverage requests made, done the last one an apply
	// covered; err is the last apply's error.
	want, done int64
	err        error
	errFor     int64         // the want of the apply that failed with err
	changed    chan struct{} // closed after every apply attempt
	kick       chan struct{}
	// emptySince is when the process last had no queue.
	emptySince time.Time
}

func newHubSub() *hubSub {
	return &hubSub{changed: make(chan struct{}), kick: make(chan struct{}, 1), types: map[string]bool{}}
}

// covers reports whether the subscription takes every event of groups.
// Callers hold s.mu.
func (s *hubSub) covers(groups filter.Groups) bool {
	if !s.exists {
		return false
	}
	if s.all {
		return true
	}
	if len(groups) == 0 {
		return false
	}
	for _, g := range groups {
		if !s.types[g.EventType] {
			return false
		}
	}
	return true
}

func (s *hubSub) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// cover waits until the hub subscription takes every event groups
// select, so that a stream that opens receives whatever is published once
// it is told it is connected. The queue must be registered first (subLoop
// reads what to take from the registered queues).
func (h *Hub) cover(ctx context.Context, groups filter.Groups) error {
	s := h.subs
	s.mu.Lock()
	if s.covers(groups) {
		s.mu.Unlock()
		return nil
	}
	s.want++
	my := s.want
	ch := s.changed
	s.mu.Unlock()
	s.wake()
	t := time.NewTimer(hubCoverWait)
	defer t.Stop()
	for {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return herr.New(herr.Unavailable, "the message broker did not take the stream's subscription in time; retry with backoff")
		}
		s.mu.Lock()
		done, err := s.done >= my, s.err
		if s.errFor < my {
			err = nil // an apply that began before this request
		}
		ch = s.changed
		s.mu.Unlock()
		if done {
			return nil
		}
		if err != nil {
			return brokerErr(err)
		}
	}
}

// waitSubscription blocks until the subscription exists (or the hub
// stops; false then).
func (h *Hub) waitSubscription() bool {
	s := h.subs
	for {
		s.mu.Lock()
		exists, ch := s.exists, s.changed
		s.mu.Unlock()
		if exists {
			return true
		}
		select {
		case <-ch:
		case <-h.ctx.Done():
			return false
		}
	}
}

// lostSubscription records that the subscription is gone (the reaper took
// this process for dead during a long pause), so that subLoop makes it
// again. Events published meanwhile are lost to this process's queues.
func (h *Hub) lostSubscription() {
	s := h.subs
	s.mu.Lock()
	s.exists, s.all = false, false
	clear(s.types)
	s.mu.Unlock()
	s.wake()
}

// desired returns what the subscription must take for the registered
// queues: every event, these types, or nothing (no queue).
func (h *Hub) desired() (all bool, types []string, queues int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if !h.svc.cfg.Broker.CheapFilterUpdates() || len(h.anyType) > 0 || len(h.byType) > maxHubTypes {
		all = true
	}
	if !all {
		for t := range h.byType {
			types = append(types, t)
		}
		slices.Sort(types)
	}
	return all, types, len(h.queues)
}

// subLoop makes every change to the hub subscription: on a kick (a queue
// that needs coverage, a lost subscription) at once, and at every
// heartbeat to narrow it or delete it when idle.
func (h *Hub) subLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.Heartbeat)
	defer t.Stop()
	for {
		periodic := false
		select {
		case <-h.ctx.Done():
			return
		case <-h.subs.kick:
		case <-t.C:
			periodic = true
		}
		h.applySubscription(periodic)
	}
}

func (h *Hub) applySubscription(periodic bool) {
	s := h.subs
	s.mu.Lock()
	want := s.want
	exists, appliedAll := s.exists, s.all
	applied := make(map[string]bool, len(s.types))
	for t := range s.types {
		applied[t] = true
	}
	s.mu.Unlock()
	all, types, queues := h.desired()
	now := h.svc.cfg.Now()
	b := h.svc.cfg.Broker
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	var err error
	switch {
	case queues == 0:
		s.mu.Lock()
		if s.emptySince.IsZero() {
			s.emptySince = now
		}
		idle := now.Sub(s.emptySince) >= hubSubLinger
		s.mu.Unlock()
		if exists && idle {
			if err = b.DeleteSubscription(ctx, h.sub); err == nil || herr.CodeOf(err) == herr.NotFound {
				err = nil
				exists, all, types = false, false, nil
			}
		} else {
			all, types = appliedAll, keys(applied) // nothing to change
		}
	case !exists:
		err = b.CreateSubscription(ctx, h.sub, hubGroups(all, types))
		if herr.CodeOf(err) == herr.AlreadyExists {
			err = b.UpdateSubscription(ctx, h.sub, hubGroups(all, types))
		}
		if err == nil {
			exists = true
		}
	default:
		widen := !appliedAll && (all || !subset(types, applied))
		narrow := periodic && (appliedAll && !all || !appliedAll && len(types) < len(applied))
		if widen || narrow {
			err = b.UpdateSubscription(ctx, h.sub, hubGroups(all, types))
			if herr.CodeOf(err) == herr.NotFound {
				err = b.CreateSubscription(ctx, h.sub, hubGroups(all, types))
			}
		} else {
			all, types = appliedAll, keys(applied)
		}
	}
	s.mu.Lock()
	if queues > 0 {
		s.emptySince = time.Time{}
	}
	if err == nil {
		s.exists, s.all = exists, all
		clear(s.types)
		for _, t := range types {
			s.types[t] = true
		}
		s.done = want
	} else {
		s.errFor = want
		h.log(slog.LevelWarn, "hub-subscription", "the hub cannot set its subscription up; streams wait for it", "subscription", h.sub, "err", err)
	}
	s.err = err
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// hubGroups is the subscription filter taking every event, or types.
func hubGroups(all bool, types []string) filter.Groups {
	if all {
		return nil
	}
	gs := make(filter.Groups, len(types))
	for i, t := range types {
		gs[i] = filter.Group{EventType: t}
	}
	return gs
}

func subset(types []string, of map[string]bool) bool {
	for _, t := range types {
		if !of[t] {
			return false
		}
	}
	return true
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
