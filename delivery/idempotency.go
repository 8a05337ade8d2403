package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"time"

	"github.com/google/uuid"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Keyed publishes (docs/api.md, "Idempotency keys"). A publish under an
// idempotency key goes through leasestore.Store.PublishOnce: the key is
// claimed with a plan (the event ids and the publish time the publish
// will use), the events are published as planned, and the result is
// recorded; a repeat of the key answers from the plan and the result
// and publishes nothing. A publish without a key takes none of this.
//
// A batch under one key is one record (two writes for the whole batch,
// whatever its size): the key names the request, and one conditional
// write per event would multiply the cost by the batch size for no
// stronger promise.
//
// The plan is binary: the publish time (Unix ns, 8 bytes) and each
// event's id (a UUID, 16 bytes), so a batch of 1,000 plans 16 KB. The
// result records the failure reasons of the events the broker refused
// (JSON, index to reason; empty when every event was published). A
// publish that published nothing (every event refused, or the request
// failed) is released, not recorded: its repeat publishes afresh.

// DefaultIdempotencyWait is Config.IdempotencyWait's default.
const DefaultIdempotencyWait = time.Second

// keyedPlan is a keyed publish's plan.
type keyedPlan struct {
	at  time.Time
	ids []string
}

func newPlan(at time.Time, n int) keyedPlan {
	p := keyedPlan{at: at, ids: make([]string, n)}
	for i := range p.ids {
		p.ids[i] = newEventID()
	}
	return p
}

func (p keyedPlan) encode() []byte {
	b := make([]byte, 8, 8+16*len(p.ids))
	binary.BigEndian.PutUint64(b, uint64(p.at.UnixNano()))
	for _, id := range p.ids {
		u := uuid.MustParse(id)
		b = append(b, u[:]...)
	}
	return b
}

func decodePlan(b []byte, n int) (keyedPlan, error) {
	if len(b) != 8+16*n {
		return keyedPlan{}, herr.New(herr.Internal, "a stored idempotency plan holds %d bytes, not the %d of %d events", len(b), 8+16*n, n)
	}
	p := keyedPlan{at: time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC(), ids: make([]string, n)}
	for i := range n {
		var u uuid.UUID
		copy(u[:], b[8+16*i:])
		p.ids[i] = u.String()
	}
	return p, nil
}

// fingerprint is a digest of a keyed request: its kind and every event's
// fields as given (a repeat must send the same request).
type keyPrint struct{ h hash.Hash }

func newKeyPrint(kind string) keyPrint {
	k := keyPrint{h: sha256.New()}
	k.str(kind)
	return k
}

func (k keyPrint) str(s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	k.h.Write(n[:])
	k.h.Write([]byte(s))
}

func (k keyPrint) event(e *Event) {
	k.str(e.EventType)
	k.str(string(e.Message))
	if e.OccurredAt.IsZero() {
		k.str("")
	} else {
		k.str(e.OccurredAt.UTC().Format(time.RFC3339Nano))
	}
	k.str(e.ResourceID)
}

func (k keyPrint) sum() []byte { return k.h.Sum(nil) }

// checkKeyed returns key's error, or FailedPrecondition for a Service
// without a store to keep keys in.
func (s *Service) checkKeyed(key string) error {
	if err := leasestore.CheckIdempotencyKey(key); err != nil {
		return herr.InField(err, "Idempotency-Key")
	}
	if s.cfg.Store == nil {
		return herr.New(herr.FailedPrecondition, "this deployment has no lease store to keep idempotency keys in")
	}
	return nil
}

func (s *Service) keyRequest(p *auth.Principal, key string, fp []byte, plan keyedPlan) leasestore.KeyedPublish {
	return leasestore.KeyedPublish{
		KeyRequest: leasestore.KeyRequest{
			Principal: p.ID, Key: key, Fingerprint: fp, Plan: plan.encode(),
			Window: s.cfg.IdempotencyWindow,
		},
		Wait: s.cfg.IdempotencyWait,
	}
}

// PublishOutcomeKeyed is PublishOutcome under idempotency key key ("":
// none, exactly PublishOutcome). replayed says the key's first publish
// answered the outcome and nothing was published now.
//
// Errors: PublishOutcome's; herr.InvalidArgument for a key that is not
// 1–200 printable ASCII characters, and *leasestore.KeyReusedError
// (InvalidArgument) for a key used with another event;
// *leasestore.KeyBusyError (herr.Aborted, with a retry-after) while the
// key's first publish is in progress; the store's errors.
func (s *Service) PublishOutcomeKeyed(ctx context.Context, p *auth.Principal, key string, e Event) (o Outcome, replayed bool, err error) {
	if key == "" {
		o, err = s.PublishOutcome(ctx, p, e)
		return o, false, err
	}
	if err := s.checkKeyed(key); err != nil {
		return Outcome{}, false, err
	}
	if err := e.validateOnce(); err != nil {
		return Outcome{}, false, err
	}
	fp := newKeyPrint("single")
	fp.event(&e)
	kp := s.keyRequest(p, key, fp.sum(), newPlan(s.cfg.Now().UTC(), 1))
	kp.Publish = func(ctx context.Context, plan []byte, _ bool) ([]byte, bool, error) {
		pl, err := decodePlan(plan, 1)
		if err != nil {
			return nil, false, err
		}
		sendCtx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
		defer cancel()
		pub, err := s.publish(ctx, sendCtx, p, e, pl.ids[0], pl.at)
		switch {
		case err == nil:
			o = Outcome{Published: pub, At: pl.at}
			return nil, true, nil
		case herr.CodeOf(err) == herr.Unavailable:
			o = Outcome{FailureReason: FailureReason(err), At: pl.at}
			return nil, false, nil
		}
		return nil, false, err
	}
	ko, err := s.cfg.Store.PublishOnce(ctx, kp)
	if err != nil {
		return Outcome{}, false, err
	}
	s.recordFailed(ctx, ko)
	if !ko.Replayed {
		return o, false, nil
	}
	outs, err := replayOutcomes(ko, 1)
	if err != nil {
		return Outcome{}, false, err
	}
	return outs[0], true, nil
}

// PublishItemsKeyed is PublishItems under one idempotency key for the
// whole batch ("": none, exactly PublishItems); replayed and the errors
// as PublishOutcomeKeyed's (the errors only for a keyed batch).
func (s *Service) PublishItemsKeyed(ctx context.Context, p *auth.Principal, key string, items []BatchItem) (outs []Outcome, replayed bool, err error) {
	if key == "" {
		return s.PublishItems(ctx, p, items), false, nil
	}
	if err := s.checkKeyed(key); err != nil {
		return nil, false, err
	}
	fp := newKeyPrint("batch")
	for i := range items {
		if items[i].Err != nil {
			fp.str("!" + herr.MessageOf(items[i].Err))
			continue
		}
		fp.event(&items[i].Event)
	}
	n := len(items)
	kp := s.keyRequest(p, key, fp.sum(), newPlan(s.cfg.Now().UTC(), n))
	kp.Publish = func(ctx context.Context, plan []byte, _ bool) ([]byte, bool, error) {
		pl, err := decodePlan(plan, n)
		if err != nil {
			return nil, false, err
		}
		outs = make([]Outcome, n)
		for i := range outs {
			outs[i].At = pl.at
		}
		events := make([]Event, 0, n)
		ids := make([]string, 0, n)
		index := make([]int, 0, n)
		for i, it := range items {
			if it.Err != nil {
				outs[i].FailureReason = FailureReason(it.Err)
				continue
			}
			events = append(events, it.Event)
			ids = append(ids, pl.ids[i])
			index = append(index, i)
		}
		any := false
		for k, r := range s.publishBatch(ctx, p, events, ids, pl.at) {
			if r.Err != nil {
				outs[index[k]].FailureReason = FailureReason(r.Err)
				continue
			}
			outs[index[k]].Published = r.Published
			any = true
		}
		failed := map[int]string{}
		for i := range outs {
			if !outs[i].Success() {
				failed[i] = outs[i].FailureReason
			}
		}
		if len(failed) == 0 {
			return nil, any, nil
		}
		res, err := json.Marshal(failed)
		return res, any, err
	}
	ko, err := s.cfg.Store.PublishOnce(ctx, kp)
	if err != nil {
		return nil, false, err
	}
	s.recordFailed(ctx, ko)
	if !ko.Replayed {
		return outs, false, nil
	}
	outs, err = replayOutcomes(ko, n)
	return outs, err == nil, err
}

// replayOutcomes rebuilds the outcomes of a keyed publish of n events
// from its plan and recorded result.
func replayOutcomes(ko *leasestore.KeyOutcome, n int) ([]Outcome, error) {
	pl, err := decodePlan(ko.Plan, n)
	if err != nil {
		return nil, err
	}
	failed := map[int]string{}
	if len(ko.Result) > 0 {
		if err := json.Unmarshal(ko.Result, &failed); err != nil {
			return nil, herr.Wrap(herr.Internal, err, "a stored idempotency result is corrupt")
		}
	}
	outs := make([]Outcome, n)
	for i := range outs {
		outs[i].At = pl.at
		if r, ok := failed[i]; ok {
			outs[i].FailureReason = r
			continue
		}
		outs[i].Published = &Published{ID: pl.ids[i], PublishedAt: pl.at}
	}
	return outs, nil
}

// recordFailed logs a keyed publish whose result could not be recorded:
// the publisher has its answer, and a repeat after the claim's hold
// publishes the same events again (same ids).
func (s *Service) recordFailed(ctx context.Context, ko *leasestore.KeyOutcome) {
	if ko.RecordErr != nil {
		s.warn(ctx, "keyed publish: the result could not be recorded on its idempotency key", ko.RecordErr)
	}
}
