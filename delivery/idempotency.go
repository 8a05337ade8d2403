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
// whole batch ("": none, exactly PublishItems), or under the keys of its
// events (BatchItem.Key; publishEach), never both; replayed says every
// outcome is a replay (each says so itself too, Outcome.Replayed), and
// the errors are PublishOutcomeKeyed's (only for a keyed batch).
//
// Errors for per-event keys: herr.Malformed (HTTP 400) for a batch key
// together with event keys, or one key on two events of the batch;
// herr.FailedPrecondition without a store. A malformed event key, a key
// reused with another event (*leasestore.KeyReusedError) or one in use
// by a publish in progress (*leasestore.KeyBusyError) fails its event
// alone (success false, the error's message as its failure reason).
func (s *Service) PublishItemsKeyed(ctx context.Context, p *auth.Principal, key string, items []BatchItem) (outs []Outcome, replayed bool, err error) {
	if perEvent, err := checkEventKeys(key, items); err != nil {
		return nil, false, err
	} else if perEvent {
		return s.publishEach(ctx, p, items)
	}
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

// checkEventKeys reports whether items carry keys of their own, or
// herr.Malformed for event keys beside a batch key or a key on two
// events.
func checkEventKeys(batchKey string, items []BatchItem) (bool, error) {
	var first map[string]int // key → its first event
	for i := range items {
		k := items[i].Key
		if k == "" {
			continue
		}
		if batchKey != "" {
			return false, herr.New(herr.Malformed, "events[%d] has an idempotency key of its own and the request has one for the whole batch: send either the batch's key or the events' keys", i)
		}
		if first == nil {
			first = make(map[string]int)
		}
		if j, ok := first[k]; ok {
			return false, herr.New(herr.Malformed, "events[%d] and events[%d] have the same idempotency key: each event's key must be its own", j, i)
		}
		first[k] = i
	}
	return first != nil, nil
}

// publishEach publishes a batch whose events carry keys of their own
// (leasestore.PublishEach): each keyed event is a keyed publish of one
// event, with the same fingerprint and plan as PublishOutcomeKeyed's, so
// an event's key and a single publish's are interchangeable. The events
// claimed now and the batch's unkeyed events go to the broker in one
// batch (per publish time: a taken-over key keeps its first plan's).
func (s *Service) publishEach(ctx context.Context, p *auth.Principal, items []BatchItem) ([]Outcome, bool, error) {
	if s.cfg.Store == nil {
		return nil, false, herr.New(herr.FailedPrecondition, "this deployment has no lease store to keep idempotency keys in")
	}
	now := s.cfg.Now().UTC()
	outs := make([]Outcome, len(items))
	var (
		reqs   []leasestore.KeyRequest
		keyed  []int // reqs[k] is items[keyed[k]]
		plain  []int // the valid unkeyed items
		replay = true
	)
	for i := range items {
		outs[i].At = now
		it := &items[i]
		err := it.Err
		if err == nil && it.Key != "" {
			err = herr.InField(leasestore.CheckIdempotencyKey(it.Key), "idempotency_key")
		}
		switch {
		case err != nil:
			outs[i].FailureReason = FailureReason(err)
			replay = false
		case it.Key == "":
			plain = append(plain, i)
			replay = false
		default:
			fp := newKeyPrint("single")
			fp.event(&it.Event)
			reqs = append(reqs, s.keyRequest(p, it.Key, fp.sum(), newPlan(now, 1)).KeyRequest)
			keyed = append(keyed, i)
		}
	}
	publish := func(ctx context.Context, claimed []int, plans [][]byte) ([][]byte, []bool, error) {
		published := make([]bool, len(claimed))
		// Group by publish time: the plain events and new keys share now.
		type part struct {
			events []Event
			ids    []string
			index  []int // outs index
			claim  []int // index in claimed, -1 for a plain event
		}
		parts := map[int64]*part{} // by publish time, Unix ns
		var order []time.Time
		partAt := func(at time.Time) *part {
			pt, ok := parts[at.UnixNano()]
			if !ok {
				pt = &part{}
				parts[at.UnixNano()] = pt
				order = append(order, at)
			}
			return pt
		}
		// In batch order, as PublishItems sends them.
		type slot struct {
			k  int // index in claimed; -1 for a plain event
			id string
			at time.Time
		}
		slots := make(map[int]slot, len(plain)+len(claimed))
		for _, i := range plain {
			slots[i] = slot{k: -1, id: newEventID(), at: now}
		}
		for k, c := range claimed {
			pl, err := decodePlan(plans[k], 1)
			if err != nil {
				return nil, nil, err
			}
			slots[keyed[c]] = slot{k: k, id: pl.ids[0], at: pl.at}
		}
		for i := range items {
			sl, ok := slots[i]
			if !ok {
				continue
			}
			outs[i].At = sl.at
			pt := partAt(sl.at)
			pt.events, pt.ids = append(pt.events, items[i].Event), append(pt.ids, sl.id)
			pt.index, pt.claim = append(pt.index, i), append(pt.claim, sl.k)
		}
		for _, at := range order {
			pt := parts[at.UnixNano()]
			for j, r := range s.publishBatch(ctx, p, pt.events, pt.ids, at) {
				i := pt.index[j]
				if r.Err != nil {
					outs[i].FailureReason = FailureReason(r.Err)
					continue
				}
				outs[i].Published = r.Published
				if k := pt.claim[j]; k >= 0 {
					published[k] = true
				}
			}
		}
		return nil, published, nil
	}
	kos, err := s.cfg.Store.PublishEach(ctx, leasestore.KeyedEvents{Keys: reqs, Wait: s.cfg.IdempotencyWait, Publish: publish})
	if err != nil {
		return nil, false, err
	}
	for k, ko := range kos {
		i := keyed[k]
		s.recordFailed(ctx, &ko.KeyOutcome)
		switch {
		case ko.Err != nil:
			outs[i].FailureReason = FailureReason(ko.Err)
			replay = false
		case ko.Replayed:
			r, err := replayOutcomes(&ko.KeyOutcome, 1)
			if err != nil {
				return nil, false, err
			}
			outs[i] = r[0]
		default:
			replay = false
		}
	}
	return outs, replay, nil
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
		outs[i].At, outs[i].Replayed = pl.at, true
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
