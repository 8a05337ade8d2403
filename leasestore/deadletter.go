package leasestore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/docstore"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore/internal/faults"
)

// Dead-letter reasons (the notifications API, DeadLetteredEvent.Reason, without the
// REASON_ prefix).
const (
	// ReasonDeliveryLimit: redelivering the event would have passed
	// Options.DeliveryLimit.
	ReasonDeliveryLimit = "DELIVERY_LIMIT"
	// ReasonExpired: the event outlived its queue's MessageTTL before it
	// could be handed out.
	ReasonExpired = "EXPIRED"
	// ReasonMaxLen: the event was evicted, oldest first, because its queue
	// held more than its MaxLength.
	ReasonMaxLen = "MAXLEN"
	// ReasonRejected: the consumer rejected the event (an acknowledgement
	// with status "rejected"), sending it to the dead-letter queue at once.
	// The notifications API's gRPC Reason enum has no value for it: it is
	// reported there as REASON_DELIVERY_LIMIT (the consumer spent the
	// event's delivery budget at once), over REST as "REJECTED".
	ReasonRejected = "REJECTED"
)

// DeadLetter is one event in the dead-letter queue, a record of kind
// "deadletter" keyed "d:<ID>". There is one per dead-lettered event (a
// batch lease past the delivery limit gives one per event). It is written
// before the event leaves its consumer, so a failure in between leaves the
// event in both places, never in neither.
type DeadLetter struct {
	// ID identifies the dead letter for ReplayDeadLetter and
	// DiscardDeadLetter: "<origin>:<incarnation>:<position>", the position
	// zero-padded to 20 digits, or "<origin>:<incarnation>:u<event id>"
	// for an event that never reached its consumer
	// (DeadLetterUnreceived). It is deterministic, so finishing an
	// interrupted dead-lettering never makes a second copy.
	ID string
	// Reason is ReasonDeliveryLimit, ReasonExpired, ReasonMaxLen or
	// ReasonRejected.
	Reason string
	// OriginQueue is the id of the consumer (queue, or the durable-consumer API durable
	// consumer) the event was dead-lettered from; a replay returns it there.
	OriginQueue string
	// EventType and ResourceID are the event's CloudEvents "type" and
	// "subject" ("" when the body is not a CloudEvent or has none).
	EventType  string
	ResourceID string
	// DeliveryCount is how often the event was delivered before it was
	// dead-lettered (0 for an event that expired or was evicted before its
	// first delivery).
	DeliveryCount int64
	// DeadLetteredAt is when the event was dead-lettered (millisecond
	// precision).
	DeadLetteredAt time.Time
	// Body is the encoded CloudEvent, as the consumer held it.
	Body []byte
}

// ReplayOutcome is the outcome of ReplayDeadLetter (the notifications API,
// ActionOutcome.Outcome, without the OUTCOME_ prefix).
type ReplayOutcome string

// Replay outcomes.
const (
	// ReplayReplayed: the event is back on its origin consumer, waiting
	// for delivery with a fresh delivery budget; the dead letter is gone.
	ReplayReplayed ReplayOutcome = "REPLAYED"
	// ReplayOriginQueueDeleted: the origin consumer does not exist; the
	// dead letter is left in place.
	ReplayOriginQueueDeleted ReplayOutcome = "ORIGIN_QUEUE_DELETED"
	// ReplayFailed: the replay could not be confirmed (a store write
	// failed); the dead letter is left in place.
	ReplayFailed ReplayOutcome = "REPLAY_FAILED"
)

// deadLetterDoc is the stored form of a DeadLetter.
type deadLetterDoc struct {
	Key           string `docstore:"key"`
	Kind          string `docstore:"kind"`
	Reason        string `docstore:"reason"`
	Origin        string `docstore:"origin"`
	Incarnation   string `docstore:"incarnation"` // of the origin consumer
	Position      int64  `docstore:"position"`
	EventType     string `docstore:"event_type"`
	ResourceID    string `docstore:"resource_id"`
	DeliveryCount int64  `docstore:"delivery_count"`
	At            int64  `docstore:"dead_lettered_ms"` // Unix ms
	Body          []byte `docstore:"body"`

	DocstoreRevision any
}

const deadLetterPrefix = "d:"

func deadLetterKey(consumer, incarnation string, position int64) string {
	return fmt.Sprintf("%s%s:%s:%020d", deadLetterPrefix, consumer, incarnation, position)
}

func (dl *deadLetterDoc) view() *DeadLetter {
	return &DeadLetter{
		ID: strings.TrimPrefix(dl.Key, deadLetterPrefix), Reason: dl.Reason, OriginQueue: dl.Origin,
		EventType: dl.EventType, ResourceID: dl.ResourceID, DeliveryCount: dl.DeliveryCount,
		DeadLetteredAt: time.UnixMilli(dl.At).UTC(), Body: dl.Body,
	}
}

// eventAttrs reads the CloudEvents attributes the dead-letter queue and the
// message TTL need from an encoded event. Anything that is not a JSON
// object gives zero values.
type eventAttrs struct {
	Type        string `json:"type"`
	Subject     string `json:"subject"`
	PublishedAt string `json:"publishedat"`
}

func readAttrs(body []byte) eventAttrs {
	var a eventAttrs
	_ = json.Unmarshal(body, &a) // unknown members (data) are skipped, not decoded
	return a
}

// publishedMs returns the enqueue time of an incoming event in Unix ms: its
// PublishedAt, else its body's "publishedat", else 0 (unknown).
func publishedMs(in Incoming) int64 {
	if !in.PublishedAt.IsZero() {
		return in.PublishedAt.UnixMilli()
	}
	if t, err := time.Parse(time.RFC3339Nano, readAttrs(in.Body).PublishedAt); err == nil {
		return t.UnixMilli()
	}
	return 0
}

// finishDying moves the dying leases of block b of d (as read, or as just
// written) to the dead-letter queue: first one dead-letter record per
// event, under its deterministic key, then one conditional write of the
// block that removes the leases, so the cursor passes their positions. A
// lost race re-reads the block and does it again (the records are simply
// rewritten). A failure leaves the leases dying, and any operation that
// meets them later finishes the job; as the records come first, an event
// is never in neither place.
func (s *Store) finishDying(ctx context.Context, d *consumerDoc, b *blockDoc) error {
	for attempt := 0; ; attempt++ {
		if b == nil || !b.hasDying() {
			return nil
		}
		if err := faults.Check(faults.DeadLetterWrite, d.ID); err != nil {
			return err
		}
		pd, err := s.getPayload(ctx, d.ID, b.Payload)
		if err != nil {
			if errors.Is(err, errPayloadGone) {
				return herr.New(herr.Internal, "leases of %q are being dead-lettered, but their payload is gone", d.ID)
			}
			return err
		}
		acts := s.coll.Actions()
		kept := b.Leases[:0:0]
		for i := range b.Leases {
			l := &b.Leases[i]
			if l.Dying == "" {
				kept = append(kept, *l)
				continue
			}
			events, err := pd.events(b, l)
			if err != nil {
				return err
			}
			for j, body := range events {
				a := readAttrs(body)
				acts.Put(&deadLetterDoc{
					Key: deadLetterKey(d.ID, d.Incarnation, l.Start+int64(j)), Kind: kindDeadLetter,
					Reason: l.Dying, Origin: d.ID, Incarnation: d.Incarnation, Position: l.Start + int64(j),
					EventType: a.Type, ResourceID: a.Subject, DeliveryCount: l.Attempt,
					At: l.Expires, Body: body,
				})
			}
		}
		if err := acts.Do(ctx); err != nil {
			return storeErr(err)
		}
		if err := faults.Check(faults.DeadLetterRemove, d.ID); err != nil {
			return err
		}
		moved := map[string]int{}
		for i := range b.Leases {
			if l := &b.Leases[i]; l.Dying != "" {
				moved[l.Dying] += int(l.Count)
			}
		}
		b.Leases = kept
		ok, err := s.commit(ctx, d.ID, blockWrite(b))
		if err != nil {
			return err
		}
		if ok {
			// Counted once, by the write that removed them.
			for reason, n := range moved {
				telemetry.DeadLettered(ctx, reason, n)
			}
			s.notes.noteBlock(d, b)
			s.dropIfEmpty(ctx, d, b)
			return nil
		}
		if attempt >= s.opts.MaxRetries {
			return herr.New(herr.Aborted, "too much contention on this consumer; retry")
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return err
		}
		bs, err := s.getBlocks(ctx, d, []int64{b.Start})
		if err != nil {
			return err
		}
		b = bs[b.Start]
	}
}

// ListDeadLetters returns up to limit dead letters (limit ≥ 1) in a stable
// order, by DeadLetteredAt and then by ID, starting after pageToken ("" for
// the first page), and the token of the next page ("" after the last). The
// order does not change as dead letters come and go: a dead letter written
// after a page was read appears on a later page only if it sorts after
// that page. A token that this method did not issue is herr.InvalidArgument.
//
// Cost: every page queries every dead-letter record's key and time (records
// of kind "deadletter"; on DynamoDB that is a scan of the table) and sorts
// them in memory, then reads the page's records in full. Listing all N dead
// letters in pages of L costs N·N/L small reads; the dead-letter queue is
// meant to be triaged down, not to grow without bound.
func (s *Store) ListDeadLetters(ctx context.Context, limit int, pageToken string) ([]*DeadLetter, string, error) {
	if limit < 1 {
		return nil, "", herr.New(herr.InvalidArgument, "limit must be at least 1")
	}
	after, err := parsePageToken(pageToken)
	if err != nil {
		return nil, "", err
	}
	type ref struct {
		at  int64
		key string
	}
	less := func(a, b ref) int {
		if a.at != b.at {
			return int(min(max(a.at-b.at, -1), 1))
		}
		return strings.Compare(a.key, b.key)
	}
	var refs []ref
	err = eachOfKind(ctx, s, kindDeadLetter, func(dl *deadLetterDoc) error {
		r := ref{at: dl.At, key: dl.Key}
		if after == nil || less(r, ref{at: after.at, key: after.key}) > 0 {
			refs = append(refs, r)
		}
		return nil
	}, "key", "dead_lettered_ms")
	if err != nil {
		return nil, "", err
	}
	slices.SortFunc(refs, less)
	next := ""
	if len(refs) > limit {
		refs = refs[:limit]
		last := refs[limit-1]
		next = pageToken64(last.at, last.key)
	}
	docs := make([]*deadLetterDoc, len(refs))
	acts := s.coll.Actions()
	for i, r := range refs {
		docs[i] = &deadLetterDoc{Key: r.key}
		acts.Get(docs[i])
	}
	if err := acts.Do(ctx); err != nil {
		var errs docstore.ActionListError
		if !errors.As(err, &errs) {
			return nil, "", storeErr(err)
		}
		// A dead letter replayed or discarded since the query is left out.
		for _, e := range errs {
			if gcerrors.Code(e.Err) != gcerrors.NotFound {
				return nil, "", storeErr(err)
			}
			docs[e.Index] = nil
		}
	}
	out := make([]*DeadLetter, 0, len(docs))
	for _, dl := range docs {
		if dl != nil {
			out = append(out, dl.view())
		}
	}
	return out, next, nil
}

type pageToken struct {
	at  int64
	key string
}

func pageToken64(at int64, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at, 10) + " " + key))
}

func parsePageToken(t string) (*pageToken, error) {
	if t == "" {
		return nil, nil
	}
	bad := herr.New(herr.InvalidArgument, "page token is not one this listing issued")
	b, err := base64.RawURLEncoding.DecodeString(t)
	if err != nil {
		return nil, bad
	}
	at, key, ok := strings.Cut(string(b), " ")
	if !ok || !strings.HasPrefix(key, deadLetterPrefix) {
		return nil, bad
	}
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return nil, bad
	}
	return &pageToken{at: n, key: key}, nil
}

// getDeadLetter reads dead letter id, or herr.NotFound.
func (s *Store) getDeadLetter(ctx context.Context, id string) (*deadLetterDoc, error) {
	dl := &deadLetterDoc{Key: deadLetterPrefix + id}
	if err := s.coll.Get(ctx, dl); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, herr.New(herr.NotFound, "no dead letter %q (it may have been replayed or discarded)", id)
		}
		return nil, storeErr(err)
	}
	return dl, nil
}

// finishOrigin finishes the dead-lettering of dl's event if its origin
// consumer still holds it dying (the move was interrupted after the
// dead-letter record was written). Replaying or discarding the record
// before that would let the unfinished move write it again. It reports
// whether the origin consumer exists, and whether it finished a move (which
// rewrote dl's record).
func (s *Store) finishOrigin(ctx context.Context, dl *deadLetterDoc) (exists, finished bool, err error) {
	d, err := s.getAny(ctx, dl.Origin)
	if herr.CodeOf(err) == herr.NotFound {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	if d.Incarnation != dl.Incarnation || d.Layout != layoutBlocks {
		return true, false, nil
	}
	i := d.Blocks.containing(dl.Position)
	if i < 0 {
		return true, false, nil
	}
	bs, err := s.getBlocks(ctx, d, []int64{d.Blocks[i].Start})
	if err != nil {
		return false, false, err
	}
	b := bs[d.Blocks[i].Start]
	if b == nil {
		return true, false, nil
	}
	for _, l := range b.Leases {
		if l.Dying != "" && l.Start <= dl.Position && dl.Position < l.Start+l.Count {
			return true, true, s.finishDying(ctx, d, b)
		}
	}
	return true, false, nil
}

// ReplayDeadLetter returns dead letter id's event to its exact origin
// consumer (the notifications API, ACTION_REPLAY: confirm-gated and no-loss):
//
//  1. one atomic write of the origin consumer's head (a new position),
//     a block holding a requeued single-event lease there, with a fresh
//     delivery budget (delivered next with Attempt 1), and a payload record
//     holding the event under a key derived from id (for a MessageTTL, its
//     age starts now);
//  2. only then the dead letter is deleted.
//
// If the move of the event to the dead-letter queue was interrupted (its
// origin still holds it, marked), that move is finished first.
//
// Outcomes: ReplayReplayed; ReplayOriginQueueDeleted when no consumer has
// the origin id (the dead letter is left); ReplayFailed with the store's
// error when a step fails (the dead letter is left). A replay whose first
// step succeeded and whose delete failed reports ReplayFailed too; the
// event is then on its consumer already, and replaying again does not add
// it twice while that event is held (step 1 finds its payload). A replay
// into a consumer whose in-flight window is full is ReplayFailed with
// herr.ResourceExhausted. An unknown id is herr.NotFound (outcome "").
func (s *Store) ReplayDeadLetter(ctx context.Context, id string) (ReplayOutcome, error) {
	dl, err := s.getDeadLetter(ctx, id)
	if err != nil {
		if herr.CodeOf(err) == herr.NotFound {
			return "", err
		}
		return ReplayFailed, err
	}
	exists, _, err := s.finishOrigin(ctx, dl)
	if err != nil {
		return ReplayFailed, err
	}
	if !exists {
		return ReplayOriginQueueDeleted, nil
	}
	sum := sha256.Sum256([]byte(dl.Key))
	pid := "dl-" + base64.RawURLEncoding.EncodeToString(sum[:16])
	gone := false
	err = s.retry(ctx, func() (bool, error) {
		d, err := s.get(ctx, dl.Origin)
		if herr.CodeOf(err) == herr.NotFound {
			gone = true
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if _, err := s.getPayload(ctx, d.ID, pid); err == nil {
			return true, nil // an earlier replay of this dead letter is still held
		} else if !errors.Is(err, errPayloadGone) {
			return false, err
		}
		holding, err := s.holding(ctx, d, map[int64]*blockDoc{})
		if err != nil {
			return false, err
		}
		if holding >= MaxInFlight {
			return false, herr.New(herr.ResourceExhausted, "consumer %q holds %d events, its in-flight window; replay when it has room", d.ID, MaxInFlight)
		}
		if err := faults.Check(faults.ReplayConsumerWrite, d.ID); err != nil {
			return false, err
		}
		pd := &payloadDoc{
			Key: payloadKey(d.ID, pid), Kind: kindPayload, Consumer: d.ID,
			Batch: eventBatch{Events: [][]byte{dl.Body}, Published: []int64{s.nowMs()}},
		}
		r := &reservation{
			incarnation: d.Incarnation, count: 1, nowMs: s.nowMs(),
			extra: []write{{doc: pd, create: true}},
			block: func(start int64) *blockDoc {
				return &blockDoc{
					Key: blockKey(d.ID, d.Incarnation, start), Kind: kindBlock, Consumer: d.ID,
					Start: start, Count: 1, Payload: pid,
					Leases: blockLeases{{Start: start, Count: 1, Tag: newTag(), Requeued: true}},
				}
			},
		}
		s.reserve(ctx, d.ID, r)
		return r.ok, r.err
	})
	if gone {
		return ReplayOriginQueueDeleted, nil
	}
	if err != nil {
		return ReplayFailed, err
	}
	if err := faults.Check(faults.ReplayDelete, dl.Origin); err != nil {
		return ReplayFailed, err
	}
	if err := s.coll.Delete(ctx, &deadLetterDoc{Key: dl.Key}); err != nil {
		return ReplayFailed, storeErr(err)
	}
	return ReplayReplayed, nil
}

// DiscardDeadLetter deletes dead letter id (the notifications API, ACTION_DISCARD). If
// the move of its event to the dead-letter queue was interrupted, it
// finishes that first (and fails, leaving the dead letter, if it cannot).
// It fails with herr.NotFound when there is none (already replayed or
// discarded).
func (s *Store) DiscardDeadLetter(ctx context.Context, id string) error {
	dl, err := s.getDeadLetter(ctx, id)
	if err != nil {
		return err
	}
	if _, finished, err := s.finishOrigin(ctx, dl); err != nil {
		return err
	} else if finished {
		// The move rewrote the record: read its new revision.
		if dl, err = s.getDeadLetter(ctx, id); err != nil {
			return err
		}
	}
	// Conditional on the revision read: a concurrent replay or discard
	// wins, and this one reports NotFound.
	if err := s.coll.Delete(ctx, dl); err != nil {
		if c := gcerrors.Code(err); c == gcerrors.FailedPrecondition || c == gcerrors.NotFound {
			return herr.New(herr.NotFound, "no dead letter %q (it was replayed or discarded meanwhile)", id)
		}
		return storeErr(err)
	}
	return nil
}
