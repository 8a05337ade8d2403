package leasestore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"sort"
	"time"

	"gocloud.dev/docstore"
)

// Record kinds, stored in the "kind" field.
const (
	kindConsumer   = "consumer"
	kindPayload    = "payload"
	kindDeadLetter = "deadletter"
)

// consumerDoc is the stored form of a consumer and its lease table.
type consumerDoc struct {
	Key          string     `docstore:"key"`
	Kind         string     `docstore:"kind"`
	ID           string     `docstore:"id"`
	Type         string     `docstore:"type"`
	Filters      string     `docstore:"filters"` // JSON of filter.Groups
	Subscription string     `docstore:"subscription"`
	Paused       bool       `docstore:"paused"`
	CreatedAt    time.Time  `docstore:"created_at"`
	Next         int64      `docstore:"next"`      // next position to hand out (first is 1)
	Committed    int64      `docstore:"committed"` // cursor; 0 = nothing committed
	Leases       leaseTable `docstore:"leases"`    // unacknowledged leases, by start; binary, see codec.go
	Acked        spanList   `docstore:"acked"`     // acknowledged ranges above the cursor, sorted, merged; binary

	// Added for seed 002's queues; absent (zero) in older records.
	Sessions     sessionList `docstore:"sessions"`         // attached sessions and recent tombstones; binary
	LastAttached int64       `docstore:"last_attached_ms"` // Unix ms a session was last known attached; 0 = never
	MessageTTL   int64       `docstore:"message_ttl_ms"`   // 0 = none
	MaxLength    int64       `docstore:"max_length"`       // 0 = none
	// Incarnation tells consumers that reuse an id apart, so that their
	// dead letters (keyed by position) never collide. "" in older records.
	Incarnation string `docstore:"incarnation"`

	DocstoreRevision any
}

// leaseRec is one unacknowledged lease (stored by leaseTable's encoding).
type leaseRec struct {
	ID      string
	Payload string // id of the payload record holding its events; "" = ID
	Offset  int64  // index of the lease's first event in that payload
	Start   int64  // first position
	Count   int64
	Worker  string // workerKey of the holder (a session's key for session leases); "" once requeued
	// Generation counts hand-outs of this lease id; an acknowledgement must
	// name the current one.
	Generation int64
	// Attempt is the lifetime delivery count of the lease's events: 1 on
	// the first delivery, one more on every redelivery, never reset (a
	// replayed dead letter starts a new life at 0, not yet delivered).
	Attempt  int64
	Requeued bool // failed, nacked, expired, or its session left; waiting for redelivery
	// Session marks a lease handed out by PullEvents to a session (Worker
	// is the session's key): it is requeued as soon as the session is gone.
	Session bool
	// Dying is the dead-letter reason of a lease being moved to the
	// dead-letter queue (see deadletter.go), "" otherwise. A dying lease is
	// never handed out or acknowledged again.
	Dying string
	// Expires is the end of the visibility timeout (Unix ms); for a dying
	// lease, when it was dead-lettered.
	Expires int64
}

// payloadID returns the id of the payload record that holds l's events.
func (l *leaseRec) payloadID() string {
	if l.Payload != "" {
		return l.Payload
	}
	return l.ID
}

// span is a half-open range of positions [Start, End).
type span struct {
	Start int64
	End   int64
}

// payloadDoc holds encoded events that one or more leases of a consumer
// refer to (each by an offset and a count).
type payloadDoc struct {
	Key      string   `docstore:"key"`
	Kind     string   `docstore:"kind"`
	Consumer string   `docstore:"consumer"`
	Events   [][]byte `docstore:"events"`
	// Published holds each event's enqueue time in Unix ms (its
	// publishedat, or the replay time of a replayed dead letter); 0 when
	// unknown. Absent in older records.
	Published []int64 `docstore:"published"`

	DocstoreRevision any
}

// publishedAt returns the enqueue time of event i (Unix ms), 0 if unknown.
func (p *payloadDoc) publishedAt(i int64) int64 {
	if i < int64(len(p.Published)) {
		return p.Published[i]
	}
	return 0
}

// workerKey is how a lease records its worker: a fixed-size digest of the
// worker id (22 bytes) instead of the id itself, which may be 200
// characters of up to 4 bytes each. With 1,000 leases in one consumer
// record, raw ids could reach 800 KB and break DynamoDB's 400 KB item
// limit; only equality of ids matters to the state machine. The empty id
// (the shared identity) has a digest like any other. Sessions are recorded
// by the same digest of their id.
func workerKey(worker string) string {
	sum := sha256.Sum256([]byte(worker))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

func consumerKey(id string) string             { return "c:" + id }
func payloadKey(consumer, lease string) string { return "p:" + consumer + ":" + lease }

func (d *consumerDoc) inFlight() int64 {
	var n int64
	for i := range d.Leases {
		n += d.Leases[i].Count
	}
	return n
}

func (d *consumerDoc) lease(id string) int {
	for i := range d.Leases {
		if d.Leases[i].ID == id {
			return i
		}
	}
	return -1
}

// live reports whether l is held by a worker and not expired at nowMs.
func (l *leaseRec) live(nowMs int64) bool {
	return !l.Requeued && l.Dying == "" && l.Expires > nowMs
}

// reclaimable reports whether l waits for redelivery at nowMs: requeued or
// expired, and not being dead-lettered.
func (l *leaseRec) reclaimable(nowMs int64) bool { return l.Dying == "" && !l.live(nowMs) }

// reclaimable returns the index of the lease to redeliver next (the lowest
// start among requeued and expired leases), or -1.
func (d *consumerDoc) reclaimable(nowMs int64) int {
	best := -1
	for i := range d.Leases {
		l := &d.Leases[i]
		if !l.reclaimable(nowMs) {
			continue
		}
		if best < 0 || l.Start < d.Leases[best].Start {
			best = i
		}
	}
	return best
}

// reclaimOrder returns the indexes of the reclaimable leases, lowest start
// first.
func (d *consumerDoc) reclaimOrder(nowMs int64) []int {
	var out []int
	for i := range d.Leases {
		if d.Leases[i].reclaimable(nowMs) {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool { return d.Leases[out[a]].Start < d.Leases[out[b]].Start })
	return out
}

// commit removes lease i, records its range as acknowledged and advances the
// cursor over the contiguous run of acknowledged ranges.
func (d *consumerDoc) commit(i int) {
	l := d.Leases[i]
	d.Leases = append(d.Leases[:i], d.Leases[i+1:]...)
	d.addAcked(span{Start: l.Start, End: l.Start + l.Count})
	for len(d.Acked) > 0 && d.Acked[0].Start <= d.Committed+1 {
		if end := d.Acked[0].End - 1; end > d.Committed {
			d.Committed = end
		}
		d.Acked = d.Acked[1:]
	}
}

func (d *consumerDoc) addAcked(s span) {
	i := sort.Search(len(d.Acked), func(i int) bool { return d.Acked[i].Start >= s.Start })
	d.Acked = append(d.Acked, span{})
	copy(d.Acked[i+1:], d.Acked[i:])
	d.Acked[i] = s
	// Merge touching neighbours so the list stays as short as the gaps.
	merged := d.Acked[:0]
	for _, a := range d.Acked {
		if n := len(merged); n > 0 && merged[n-1].End >= a.Start {
			if a.End > merged[n-1].End {
				merged[n-1].End = a.End
			}
			continue
		}
		merged = append(merged, a)
	}
	d.Acked = merged
}

// earliestExpiry returns the earliest expiry among live leases (Unix ms), or 0.
func (d *consumerDoc) earliestExpiry(nowMs int64) int64 {
	var e int64
	for i := range d.Leases {
		l := &d.Leases[i]
		if l.live(nowMs) && (e == 0 || l.Expires < e) {
			e = l.Expires
		}
	}
	return e
}

// payloadRefs reports whether any lease of d refers to payload id.
func (d *consumerDoc) payloadRefs(id string) bool {
	for i := range d.Leases {
		if d.Leases[i].payloadID() == id {
			return true
		}
	}
	return false
}

// unreferenced returns the payload ids among ids that no lease of d refers
// to any more, each once: the payloads a write of d has freed.
func (d *consumerDoc) unreferenced(ids []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if !d.payloadRefs(id) {
			out = append(out, id)
		}
	}
	return out
}

// split cuts reclaimable lease i after its first n events (0 < n < Count):
// lease i keeps its id, state and the first n events; the rest becomes a
// new requeued lease with id restID that refers to the same payload, with
// the same generation and attempt (its events have been delivered as often
// as the others). The new lease is appended at the end of the table, so
// indexes stay valid; the table's order does not matter. It returns the
// new lease's index.
func (d *consumerDoc) split(i int, n int64, restID string) int {
	l := &d.Leases[i]
	rest := *l
	rest.ID = restID
	rest.Payload = l.payloadID()
	rest.Offset = l.Offset + n
	rest.Start = l.Start + n
	rest.Count = l.Count - n
	rest.Requeued, rest.Worker, rest.Session = true, "", false
	l.Count = n
	d.Leases = append(d.Leases, rest)
	return len(d.Leases) - 1
}

// hasDying reports whether a lease of d is being dead-lettered.
func (d *consumerDoc) hasDying() bool {
	for i := range d.Leases {
		if d.Leases[i].Dying != "" {
			return true
		}
	}
	return false
}

// holding counts the events of leases that are not being dead-lettered:
// what the in-flight window and MaxLength see.
func (d *consumerDoc) holding() int64 {
	var n int64
	for i := range d.Leases {
		if d.Leases[i].Dying == "" {
			n += d.Leases[i].Count
		}
	}
	return n
}

// markDying marks lease i for the dead-letter queue with reason at nowMs:
// no worker holds it any more, its generation moves on (an acknowledgement
// of the old one is stale), and Expires records when it was dead-lettered.
func (d *consumerDoc) markDying(i int, reason string, nowMs int64) {
	l := &d.Leases[i]
	l.Dying, l.Worker, l.Requeued, l.Session = reason, "", false, false
	l.Generation++
	l.Expires = nowMs
}

// eachOfKind calls visit with every record of kind, read with only fields
// (none: every field), and stops at visit's first error. On DynamoDB this
// is a scan of the table: the kind is not a key.
func eachOfKind[D any](ctx context.Context, s *Store, kind string, visit func(*D) error, fields ...docstore.FieldPath) error {
	it := s.coll.Query().Where("kind", "=", kind).Get(ctx, fields...)
	defer it.Stop()
	for {
		var d D
		err := it.Next(ctx, &d)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return storeErr(err)
		}
		if err := visit(&d); err != nil {
			return err
		}
	}
}
