package leasestore

import (
	"crypto/sha256"
	"encoding/base64"
	"sort"
	"time"
)

// Record kinds, stored in the "kind" field.
const (
	kindConsumer = "consumer"
	kindPayload  = "payload"
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

	DocstoreRevision any
}

// leaseRec is one unacknowledged lease (stored by leaseTable's encoding).
type leaseRec struct {
	ID         string
	Start      int64 // first position
	Count      int64
	Worker     string // workerKey of the holder; "" once requeued
	Generation int64
	Attempt    int64
	Requeued   bool  // failed by its worker or expired by the sweep; waiting for redelivery
	Expires    int64 // Unix milliseconds
}

// span is a half-open range of positions [Start, End).
type span struct {
	Start int64
	End   int64
}

// payloadDoc holds the encoded events of one lease.
type payloadDoc struct {
	Key      string   `docstore:"key"`
	Kind     string   `docstore:"kind"`
	Consumer string   `docstore:"consumer"`
	Events   [][]byte `docstore:"events"`

	DocstoreRevision any
}

// workerKey is how a lease records its worker: a fixed-size digest of the
// worker id (22 bytes) instead of the id itself, which may be 200
// characters of up to 4 bytes each. With 1,000 leases in one consumer
// record, raw ids could reach 800 KB and break DynamoDB's 400 KB item
// limit; only equality of ids matters to the state machine. The empty id
// (the shared identity) has a digest like any other.
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
func (l *leaseRec) live(nowMs int64) bool { return !l.Requeued && l.Expires > nowMs }

// reclaimable returns the index of the lease to redeliver next (the lowest
// start among requeued and expired leases), or -1.
func (d *consumerDoc) reclaimable(nowMs int64) int {
	best := -1
	for i := range d.Leases {
		l := &d.Leases[i]
		if l.live(nowMs) {
			continue
		}
		if best < 0 || l.Start < d.Leases[best].Start {
			best = i
		}
	}
	return best
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
