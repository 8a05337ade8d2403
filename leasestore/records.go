package leasestore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/google/uuid"
	"gocloud.dev/docstore"

	"github.com/heraldevents/herald/leasestore/internal/headcfg"
)

// Record kinds, stored in the "kind" field.
const (
	kindConsumer   = "consumer"
	kindBlock      = "block"
	kindPayload    = "payload"
	kindDeadLetter = "deadletter"
)

// layoutBlocks is the record layout this package writes: a small consumer
// head and one block record per reservation of positions (see the package
// doc), the head's descriptive fields packed into one attribute (see
// package headcfg). Heads of layoutUnpacked, the same but with those
// fields as attributes of their own, are read and rewritten in this layout
// at their next write. Heads of the earlier layout, which held the whole
// lease table, have no layout field (0) and are refused (see errOldLayout).
const (
	layoutUnpacked = 2
	layoutBlocks   = 3
)

// consumerDoc is the stored form of a consumer's head: what it is, its next
// position, a floor of its cursor, its sessions and the index of its open
// blocks. It never holds leases, so its size does not grow with them.
type consumerDoc struct {
	// Field names are short: DynamoDB bills attribute names with every
	// write, and the head is written with every reservation.
	Key    string `docstore:"key"`
	Kind   string `docstore:"kind"`
	Layout int64  `docstore:"layout"`
	// Config is what the consumer is (id, type, filters, limits,
	// policies), one binary attribute; its fields are the head's own in
	// Go (d.ID, d.Type, …).
	headcfg.Config `docstore:"cfg"`
	Next           int64 `docstore:"next"`  // next position to hand out (first is 1)
	Committed      int64 `docstore:"floor"` // a floor of the cursor (see Store.cursor); 0 = nothing committed
	// Blocks indexes the block records that may hold unsettled leases, by
	// start, with hints that let a pull skip blocks it has no business
	// reading (see blockEntry). Binary, see codec.go.
	Blocks blockIndex `docstore:"blocks"`

	Sessions     sessionList `docstore:"sessions"`    // attached sessions and recent tombstones; binary
	LastAttached int64       `docstore:"attached_ms"` // Unix ms a session was last known attached; 0 = never
	// Kept lists the settled blocks whose records are kept for the
	// acknowledgements they remember (see keptList); binary, and absent
	// when there are none.
	Kept keptList `docstore:"kept,omitempty"`

	// Home and Shared place a hub queue (see Consumer.Home); both absent
	// for every other consumer, so they cost its reads nothing.
	Home   string `docstore:"home,omitempty"`
	Shared bool   `docstore:"shared,omitempty"`

	DocstoreRevision any

	// The descriptive fields as layoutUnpacked stored them: filled only
	// by the read of such a head (and moved into Config by unpacked),
	// never written (all omitempty, and zero after unpacked). Last, so
	// that the read of a head of this layout never walks past them.
	unpackedFields
}

// unpackedFields are the attributes of a layoutUnpacked head that this
// layout keeps in Config.
type unpackedFields struct {
	OldID           string     `docstore:"id,omitempty"`
	OldType         string     `docstore:"type,omitempty"`
	OldFilters      string     `docstore:"filters,omitempty"`
	OldSubscription string     `docstore:"sub,omitempty"`
	OldPaused       bool       `docstore:"paused,omitempty"`
	OldCreatedAt    *time.Time `docstore:"created,omitempty"`
	OldMessageTTL   int64      `docstore:"ttl_ms,omitempty"`
	OldMaxLength    int64      `docstore:"max_len,omitempty"`
	OldRetryMin     int64      `docstore:"retry_min,omitempty"`
	OldRetryMax     int64      `docstore:"retry_max,omitempty"`
	OldMaxAttempts  int64      `docstore:"max_tries,omitempty"`
	OldAckTimeout   int64      `docstore:"ack_timeout,omitempty"`
	OldIncarnation  string     `docstore:"inc,omitempty"`
}

// unpacked brings a head read in layoutUnpacked to layoutBlocks in memory
// (its next write stores it so); other heads are left alone.
func (d *consumerDoc) unpacked() {
	if d.Layout != layoutUnpacked {
		return
	}
	o := d.unpackedFields
	d.Config = headcfg.Config{
		ID: o.OldID, Type: o.OldType, Filters: o.OldFilters, Subscription: o.OldSubscription, Paused: o.OldPaused,
		MessageTTL: o.OldMessageTTL, MaxLength: o.OldMaxLength, RetryMin: o.OldRetryMin, RetryMax: o.OldRetryMax,
		MaxAttempts: o.OldMaxAttempts, AckTimeout: o.OldAckTimeout, Incarnation: o.OldIncarnation,
	}
	if o.OldCreatedAt != nil {
		d.CreatedAt = o.OldCreatedAt.UTC()
	}
	d.unpackedFields = unpackedFields{}
	d.Layout = layoutBlocks
}

// headFields are the fields of consumerDoc, for reads that must not fail
// on a record of the earlier layout (which has others).
var headFields = []docstore.FieldPath{"key", "kind", "layout", "cfg", "next", "floor", "blocks", "sessions", "attached_ms", "home", "shared", "kept",
	"id", "type", "filters", "sub", "paused", "created", "ttl_ms", "max_len", "inc",
	"retry_min", "retry_max", "max_tries", "ack_timeout"}

// blockEntry is one entry of a head's block index. The hints are bounds
// that let readers skip blocks safely; they are refreshed whenever the
// head is written anyway (a reservation) or by ExpireLeases:
//
//   - Held is at least the number of unsettled events in the block
//     (dying ones included): it
//     only falls over a block's life, so a stale value is an upper bound,
//     and Σ Held bounds the events held in flight.
//   - Until is at most the earliest time a lease of the block can become
//     reclaimable (Unix ms); 0 means "read it on every pull". Whoever makes
//     a lease reclaimable earlier (a failed acknowledgement, a nack, a
//     dead-lettering left unfinished) lowers it in the head after writing
//     the block, and bumps Stamp, so that a refresh computed from an older
//     read of the block is not applied.
//   - Holder is a short code of the only holder of live leases (see
//     holderCode), or 0 when there is none or several. A pull reads the
//     blocks whose code is its worker's (a false match costs a read, never
//     a wrong answer). A session's code also says the holder is a
//     session, whose leases come back when it leaves: such a block is read
//     when no live session has that code.
//
// Until is stored in whole seconds, rounded down, so it stays a lower
// bound; with the short codes an entry takes about 7 bytes, so a head
// indexing 100 open blocks stays under a KiB.
type blockEntry struct {
	Start, Count int64
	Held         int64
	Until        int64
	Holder       uint16
	Stamp        uint64
}

// Holder codes: 1–127 for pull workers (one byte stored), 128–16,383 for
// sessions (two bytes), and holderNobody for a block whose leases all wait
// for a due time (delayed, or backing off): nobody's pull needs to read it
// before its Until.
const (
	workerCodes  = 127
	sessionCodes = 16383 - 127
	holderNobody = 16384
)

// holderCode returns the code of worker key (a workerKey) in a block
// index; session says the key is a session's.
func holderCode(key string, session bool) uint16 {
	var h uint16
	if len(key) >= 2 {
		h = uint16(key[0])<<8 | uint16(key[1])
	}
	if session {
		return 128 + h%sessionCodes
	}
	return 1 + h%workerCodes
}

// sessionCode reports whether code is a session's.
func sessionCode(code uint16) bool { return code >= 128 && code < holderNobody }

// blockIndex is a head's index of blocks, sorted by start.
type blockIndex []blockEntry

func (x blockIndex) find(start int64) int {
	i := sort.Search(len(x), func(i int) bool { return x[i].Start >= start })
	if i < len(x) && x[i].Start == start {
		return i
	}
	return -1
}

// containing returns the index of the entry whose block holds position p,
// or -1.
func (x blockIndex) containing(p int64) int {
	i := sort.Search(len(x), func(i int) bool { return x[i].Start+x[i].Count > p })
	if i < len(x) && x[i].Start <= p {
		return i
	}
	return -1
}

// blockDoc is one reservation of positions [Start, Start+Count) and the
// unsettled leases over them. A position no lease covers is settled
// (acknowledged or dead-lettered); a block with no lease left is deleted,
// so a block that the head indexes and the store does not hold is done.
// Its events are in the payload record named by Payload, event i at
// position Start+i.
type blockDoc struct {
	Key      string      `docstore:"key"`
	Kind     string      `docstore:"kind"`
	Consumer string      `docstore:"consumer"`
	Start    int64       `docstore:"start"`
	Count    int64       `docstore:"count"`
	Payload  string      `docstore:"payload"`
	Leases   blockLeases `docstore:"leases"` // binary, see codec.go
	// Acks remembers the acknowledgements applied to the block's leases
	// (see ackMemory); binary, and absent when there are none.
	Acks ackMemory `docstore:"acks,omitempty"`

	DocstoreRevision any
}

// Remembered acknowledgements. The durable-consumer API's "stale" says
// that nothing was committed; a client that retries an acknowledgement
// whose answer it lost (a timeout, a dropped connection) must not be
// told so when its first attempt committed. So an acknowledgement that
// settles a lease (ok: committed; rejected: dead_lettered) is remembered
// in the lease's block, in the write that settles it, and a repeat (the
// same lease id, generation and status) answers as the first did.
//
// A block whose last lease is settled is then kept, without its payload,
// instead of deleted: the head lists it in Kept (keptList) when it drops
// the block from its index, and the head write that drops it from Kept
// deletes the record. A block leaves Kept RememberAcks after it entered,
// or earlier when more than MaxRememberedBlocks blocks are kept, the
// longest kept first. So the head grows by at most MaxRememberedBlocks
// entries of about 3 bytes, whatever the window or the rate, and an
// acknowledgement still writes only its block.
const (
	// RememberAcks is how long, at least, a settled block's remembered
	// acknowledgements are kept (unless MaxRememberedBlocks pushes them
	// out first): 10 minutes, longer than the longest visibility
	// (MaxLeaseVisibility) and any client's retries.
	RememberAcks = 10 * time.Minute
	// MaxRememberedBlocks bounds how many settled blocks (each one pull of
	// new events, and the leases split from it) a consumer keeps for
	// their remembered acknowledgements.
	MaxRememberedBlocks = 128
)

// ackMemory is a block's remembered acknowledgements, one per lease
// settled by Acknowledge (ok or rejected). It holds at most one entry per
// lease the block ever had, so it is bounded by the block's events.
type ackMemory []ackRec

// ackRec is one remembered acknowledgement: of the lease at Offset from
// the block's start with Tag, for Generation, and what it answered.
type ackRec struct {
	Offset     int64
	Tag        uint64
	Generation int64
	Outcome    Outcome // OutcomeCommitted or OutcomeDeadLettered
}

// remember records that lease l's acknowledgement for generation gen
// answered outcome.
func (b *blockDoc) remember(l *leaseRec, gen int64, outcome Outcome) {
	b.Acks = append(b.Acks, ackRec{Offset: l.Start - b.Start, Tag: l.Tag, Generation: gen, Outcome: outcome})
}

// remembered returns what the acknowledgement of the lease at start with
// tag, for generation gen, answered, if b remembers one.
func (b *blockDoc) remembered(start int64, tag uint64, gen int64) (Outcome, bool) {
	for _, a := range b.Acks {
		if a.Offset == start-b.Start && a.Tag == tag && a.Generation == gen {
			return a.Outcome, true
		}
	}
	return "", false
}

// kept reports whether b, as written, is a settled block kept for its
// remembered acknowledgements.
func (b *blockDoc) kept() bool { return b != nil && len(b.Leases) == 0 && len(b.Acks) > 0 }

// keptList is a head's list of kept blocks (see RememberAcks), in the
// order they were kept: the first is the first to be forgotten.
type keptList []keptBlock

// keptBlock is a settled block whose record is kept until Until (Unix ms).
type keptBlock struct {
	Start int64
	Until int64
}

// keep adds the block at start, to be kept until until (Unix ms), unless
// it is there already.
func (d *consumerDoc) keep(start, until int64) {
	for _, k := range d.Kept {
		if k.Start == start {
			return
		}
	}
	d.Kept = append(d.Kept, keptBlock{Start: start, Until: until})
}

// forget drops from d's kept list the blocks due at nowMs and, past
// MaxRememberedBlocks, the ones kept first, and returns their starts: the
// records to delete once d is written.
func (d *consumerDoc) forget(nowMs int64) []int64 {
	var gone []int64
	kept := d.Kept[:0]
	for _, k := range d.Kept {
		if k.Until <= nowMs {
			gone = append(gone, k.Start)
			continue
		}
		kept = append(kept, k)
	}
	if over := len(kept) - MaxRememberedBlocks; over > 0 {
		for _, k := range kept[:over] {
			gone = append(gone, k.Start)
		}
		kept = kept[over:]
	}
	d.Kept = kept
	if len(d.Kept) == 0 {
		d.Kept = nil
	}
	return gone
}

// leaseRec is one unsettled lease of a block.
type leaseRec struct {
	Start int64
	Count int64
	// Tag is the random part of the lease id (see leaseID).
	Tag uint64
	// Worker is the workerKey of the holder (a session's key for session
	// leases); "" once requeued.
	Worker string
	// Generation counts hand-outs of this lease id; an acknowledgement must
	// name the current one.
	Generation int64
	// Attempt is the lifetime delivery count of the lease's events: 1 on
	// the first delivery, one more on every redelivery, never reset (a
	// replayed dead letter starts a new life at 0, not yet delivered).
	Attempt  int64
	Requeued bool // failed, nacked, or expired and swept; waiting for redelivery
	// Delayed marks a lease failed or nacked with a delay (a retryAfter,
	// or the consumer's retry policy): nobody holds it, and it waits for
	// redelivery until Expires, its due time, with no backoff on top.
	Delayed bool
	// Life is how long the lease has been with its holder at Expires, in
	// whole seconds rounded up: Expires minus Life is when it was handed
	// out, which bounds Extend (MaxLeaseLife). 0 for a lease written by a
	// Herald before Extend (read as MaxLeaseVisibility) and for leases
	// nobody holds.
	Life int64
	// Session marks a lease handed out by PullEvents to a session (Worker
	// is the session's key): it comes back as soon as the session is gone.
	Session bool
	// Dying is the dead-letter reason of a lease being moved to the
	// dead-letter queue (see deadletter.go), "" otherwise. A dying lease is
	// never handed out or acknowledged again.
	Dying string
	// Expires is the end of the visibility timeout (Unix ms); for a dying
	// lease, when it was dead-lettered.
	Expires int64
}

// payloadDoc holds the encoded events of one block.
type payloadDoc struct {
	Key      string `docstore:"key"`
	Kind     string `docstore:"kind"`
	Consumer string `docstore:"consumer"`
	// Batch holds the events and each one's enqueue time in Unix ms (its
	// publishedat, or the replay time of a replayed dead letter; 0 when
	// unknown), packed and compressed (see eventBatch).
	Batch eventBatch `docstore:"batch"`
	// Events and Published hold the same as a plain list instead, on a
	// Store with Options.Uncompressed (an in-memory store, where packing
	// would only add a copy); Batch is then empty.
	Events    [][]byte `docstore:"events"`
	Published []int64  `docstore:"published"`

	DocstoreRevision any
}

// events returns the payload's events and enqueue times, whichever form
// holds them.
func (p *payloadDoc) all() ([][]byte, []int64) {
	if len(p.Events) > 0 {
		return p.Events, p.Published
	}
	return p.Batch.Events, p.Batch.Published
}

// publishedAt returns the enqueue time of event i (Unix ms), 0 if unknown.
func (p *payloadDoc) publishedAt(i int64) int64 {
	if _, pub := p.all(); i >= 0 && i < int64(len(pub)) {
		return pub[i]
	}
	return 0
}

// workerKey is how a lease records its worker: an 8-byte digest of the
// worker id instead of the id itself, which may be 200 characters of up to
// 4 bytes each; only equality of ids matters to the state machine. The
// empty id (the shared identity) has a digest like any other. Sessions are
// recorded by the same digest of their id.
func workerKey(worker string) string {
	sum := sha256.Sum256([]byte(worker))
	return string(sum[:8])
}

func consumerKey(id string) string { return "c:" + id }
func blockKey(consumer, incarnation string, start int64) string {
	return fmt.Sprintf("l:%s:%s:%020d", consumer, incarnation, start)
}
func payloadKey(consumer, payload string) string { return "p:" + consumer + ":" + payload }

// leaseID is the id of lease l of the block starting at blockStart: a
// UUID (version 8, RFC 9562's custom layout) whose first 48 bits are the
// block's start and next 12 bits the lease's offset in the block, so an
// acknowledgement finds the one block record to read without an index;
// the remaining 62 bits are l.Tag, random, so ids cannot be guessed or
// reused.
func leaseID(blockStart int64, l *leaseRec) string {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[8:], l.Tag)
	var hi [8]byte
	binary.BigEndian.PutUint64(hi[:], uint64(blockStart)<<16)
	copy(u[:6], hi[:6])
	off := uint16(l.Start - blockStart)
	u[6] = 0x80 | byte(off>>8)&0x0f
	u[7] = byte(off)
	u[8] = 0x80 | u[8]&0x3f
	return u.String()
}

// parseLeaseID returns the block start, the lease's start and its tag from
// an id made by leaseID; ok is false for anything else.
func parseLeaseID(id string) (blockStart, start int64, tag uint64, ok bool) {
	u, err := uuid.Parse(id)
	if err != nil || u[6]>>4 != 8 || u[8]>>6 != 2 {
		return 0, 0, 0, false
	}
	var hi [8]byte
	copy(hi[:6], u[:6])
	blockStart = int64(binary.BigEndian.Uint64(hi[:]) >> 16)
	off := int64(u[6]&0x0f)<<8 | int64(u[7])
	return blockStart, blockStart + off, binary.BigEndian.Uint64(u[8:]), true
}

// newTag returns a random lease tag with the UUID variant bits set.
func newTag() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	b[0] = 0x80 | b[0]&0x3f
	return binary.BigEndian.Uint64(b[:])
}

// maxBlockEvents bounds the events of one block, so that a lease's offset
// fits the 12 bits leaseID gives it.
const maxBlockEvents = 4095

// live reports whether l is held by a worker at nowMs: not requeued, not
// dying, not expired, and for a session lease its session attached
// (sessionLive).
func (l *leaseRec) live(nowMs int64, sessionLive func(string) bool) bool {
	if l.Requeued || l.Delayed || l.Dying != "" || l.Expires <= nowMs {
		return false
	}
	return !l.Session || sessionLive(l.Worker)
}

// lease returns the index in b of the lease with start and tag, or -1.
func (b *blockDoc) lease(start int64, tag uint64) int {
	for i := range b.Leases {
		if b.Leases[i].Start == start && b.Leases[i].Tag == tag {
			return i
		}
	}
	return -1
}

// held counts b's events in leases that are not dying.
func (b *blockDoc) held() int64 {
	var n int64
	for i := range b.Leases {
		if b.Leases[i].Dying == "" {
			n += b.Leases[i].Count
		}
	}
	return n
}

// unsettled counts b's events not yet settled (dying ones included).
func (b *blockDoc) unsettled() int64 {
	var n int64
	for i := range b.Leases {
		n += b.Leases[i].Count
	}
	return n
}

// firstUnsettled returns the lowest position of b a lease still covers, or
// Start+Count when none does.
func (b *blockDoc) firstUnsettled() int64 {
	p := b.Start + b.Count
	for i := range b.Leases {
		p = min(p, b.Leases[i].Start)
	}
	return p
}

// remove drops lease i: its positions are settled.
func (b *blockDoc) remove(i int) {
	b.Leases = append(b.Leases[:i], b.Leases[i+1:]...)
}

// split cuts lease i after its first n events (0 < n < Count): lease i
// keeps its tag, state and the first n events; the rest becomes a new
// requeued lease with a new tag, the same generation and attempt (its
// events have been delivered as often as the others). The new lease is
// appended, so indexes stay valid. It returns the new lease's index.
func (b *blockDoc) split(i int, n int64) int {
	l := &b.Leases[i]
	rest := *l
	rest.Tag = newTag()
	rest.Start = l.Start + n
	rest.Count = l.Count - n
	// A delayed lease is split when it is due: the rest stays due.
	rest.Requeued, rest.Worker, rest.Session, rest.Life = !l.Delayed, "", false, 0
	l.Count = n
	b.Leases = append(b.Leases, rest)
	return len(b.Leases) - 1
}

// markDying marks lease i for the dead-letter queue with reason at nowMs:
// no worker holds it any more, its generation moves on (an acknowledgement
// of the old one is stale), and Expires records when it was dead-lettered.
func (b *blockDoc) markDying(i int, reason string, nowMs int64) {
	l := &b.Leases[i]
	l.Dying, l.Worker, l.Requeued, l.Delayed, l.Session, l.Life = reason, "", false, false, false, 0
	l.Generation++
	l.Expires = nowMs
}

// hasDying reports whether a lease of b is being dead-lettered.
func (b *blockDoc) hasDying() bool {
	for i := range b.Leases {
		if b.Leases[i].Dying != "" {
			return true
		}
	}
	return false
}

// hints computes b's index hints at nowMs (see blockEntry), with rd's
// due times for the leases nobody holds.
func (b *blockDoc) hints(nowMs int64, sessionLive func(string) bool, rd redelivery) (held, until int64, holder uint16) {
	held = b.unsettled()
	until = -1
	holders := 0
	var key string
	var session bool
	for i := range b.Leases {
		l := &b.Leases[i]
		if !l.live(nowMs, sessionLive) {
			due := rd.due(l, nowMs, sessionLive)
			if due <= nowMs {
				due = 0
			}
			if until < 0 || due < until {
				until = due
			}
			continue
		}
		if until < 0 || l.Expires < until {
			until = l.Expires
		}
		if holders == 0 || l.Worker != key {
			holders++
			key, session = l.Worker, l.Session
		}
	}
	if until < 0 {
		until = 0
		if held == 0 {
			until = 1<<62 - 1 // nothing left to reclaim
		}
	}
	switch {
	case holders == 1:
		holder = holderCode(key, session)
	case holders == 0 && until > 0 && held > 0:
		holder = holderNobody
	}
	return held, until, holder
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
