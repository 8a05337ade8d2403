package storetest

import (
	"context"
	"errors"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gocloud.dev/docstore"
	"gocloud.dev/docstore/driver"
	"gocloud.dev/gcerrors"
)

// Meter counts what a collection's traffic would cost on DynamoDB and
// Firestore, per operation and per key. Wrap a collection with it and run
// the store over the wrapped one; Report then says, for everything since
// the last Reset:
//
//   - DynamoDB write units: one per started KiB of the item written (Put,
//     Replace, Create) or deleted (Delete), at least one; twice that for a
//     write in an atomic group (docstore's AtomicWrites, a DynamoDB
//     transaction); a conditional write that fails is billed like one
//     that succeeds (DynamoDB bills the units of a failed condition).
//   - DynamoDB read units: one per started 4 KiB of the item read by a
//     strongly consistent Get (the whole item, whatever fields the Get
//     asks for), at least one; a query or scan is billed by the bytes of
//     the items it returns, rounded up to 4 KiB per query. A scan on real
//     DynamoDB reads the whole table, so queries are a lower bound.
//   - Firestore operations: document writes, deletes and reads, one each.
//   - per key: how often it was written (failed writes included) and the
//     units those writes cost, which is what DynamoDB's per-partition
//     limit (1,000 write units per second) and Firestore's advice (about
//     one sustained write per second per document) are measured against.
//
// Item sizes follow DynamoDB's rules (docs "Item sizes and formats"):
// attribute names plus values, strings and binaries by length, numbers by
// about one byte per two significant digits, lists and maps 3 bytes plus
// one per element; the revision docstore keeps in each item is counted as
// a 36-byte string, as gocloud's DynamoDB driver writes it.
//
// Latency, when positive, is slept before every call reaches the wrapped
// collection, so that an in-process collection (memdocstore) races like a
// networked one and conflict retries show up. A Meter is safe for
// concurrent use; one Meter may wrap several clients of one collection.
type Meter struct {
	// Latency is slept before each call (a round trip); 0 for none.
	Latency time.Duration

	mu    sync.Mutex
	sizes map[string]int // key → size in bytes of the item stored now
	keys  map[string]*KeyCost
	r     Report
}

// KeyCost is what writes to one key cost.
type KeyCost struct {
	Key        string
	Writes     int64 // write requests, failed ones included
	WriteUnits int64 // DynamoDB write units of those writes
}

// Report is what a Meter counted.
type Report struct {
	WriteUnits   int64 // DynamoDB write units, failed conditional writes included
	ReadUnits    int64 // DynamoDB read units (strongly consistent)
	Writes       int64 // write requests (Put, Replace, Create, Update, Delete)
	Deletes      int64 // of Writes, how many were deletes
	Reads        int64 // documents read (Gets, and each document a query returned)
	Queries      int64 // queries run
	FailedWrites int64 // conditional writes that failed (lost a race or found the key taken)
	BytesWritten int64 // bytes of items written successfully (deletes excluded)
	// BytesStored is the bytes of every item the collection holds now, as
	// far as the Meter saw them written.
	BytesStored int64
	// Hottest is the key written most often; HottestByUnits the key whose
	// writes cost the most units (often the same).
	Hottest, HottestByUnits KeyCost
}

// NewMeter returns a Meter with nothing counted.
func NewMeter() *Meter {
	return &Meter{sizes: map[string]int{}, keys: map[string]*KeyCost{}}
}

// Reset forgets the counts (not the sizes of the items stored).
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys = map[string]*KeyCost{}
	m.r = Report{}
}

// Report returns the counts since the last Reset.
func (m *Meter) Report() Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.r
	for _, k := range m.keys {
		if k.Writes > r.Hottest.Writes || (k.Writes == r.Hottest.Writes && k.Key < r.Hottest.Key) {
			r.Hottest = *k
		}
		if k.WriteUnits > r.HottestByUnits.WriteUnits || (k.WriteUnits == r.HottestByUnits.WriteUnits && k.Key < r.HottestByUnits.Key) {
			r.HottestByUnits = *k
		}
	}
	for _, s := range m.sizes {
		r.BytesStored += int64(s)
	}
	return r
}

// TopKeys returns the n keys written most often, most first.
func (m *Meter) TopKeys(n int) []KeyCost {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]KeyCost, 0, len(m.keys))
	for _, k := range m.keys {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Writes != out[j].Writes {
			return out[i].Writes > out[j].Writes
		}
		return out[i].Key < out[j].Key
	})
	return out[:min(n, len(out))]
}

// Wrap returns a collection that passes every call to inner and counts it.
// Closing the returned collection closes inner.
func (m *Meter) Wrap(inner *docstore.Collection) *docstore.Collection {
	return docstore.NewCollection(&meteredColl{m: m, inner: inner})
}

func (m *Meter) write(key string, size int, atomic, failed, del bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if del {
		size = m.sizes[key]
	}
	units := writeUnits(size)
	if atomic {
		units *= 2
	}
	m.r.Writes++
	m.r.WriteUnits += units
	k := m.keys[key]
	if k == nil {
		k = &KeyCost{Key: key}
		m.keys[key] = k
	}
	k.Writes++
	k.WriteUnits += units
	switch {
	case failed:
		m.r.FailedWrites++
	case del:
		m.r.Deletes++
		delete(m.sizes, key)
	default:
		m.r.BytesWritten += int64(size)
		m.sizes[key] = size
	}
}

func (m *Meter) get(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.r.Reads++
	m.r.ReadUnits += readUnits(m.sizes[key])
}

func (m *Meter) query(bytes int64, docs int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.r.Queries++
	m.r.Reads += docs
	m.r.ReadUnits += readUnits(int(bytes))
}

// writeUnits is DynamoDB's write units for an item of size bytes: one per
// started KiB, at least one.
func writeUnits(size int) int64 { return max(1, int64(math.Ceil(float64(size)/1024))) }

// readUnits is DynamoDB's strongly consistent read units for size bytes:
// one per started 4 KiB, at least one.
func readUnits(size int) int64 { return max(1, int64(math.Ceil(float64(size)/4096))) }

func (m *Meter) pause(ctx context.Context) {
	if m.Latency > 0 {
		_ = sleep(ctx, m.Latency)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// meteredColl is the docstore driver behind Meter.Wrap: it turns every
// driver call back into a call of the inner *docstore.Collection on the
// caller's own document (driver.Document.Origin), so the inner collection
// reads and sets fields and revisions exactly as it would unwrapped.
type meteredColl struct {
	m     *Meter
	inner *docstore.Collection
}

const keyField = "key"

func (c *meteredColl) Key(doc driver.Document) (any, error) {
	k, err := doc.GetField(keyField)
	if err != nil || k == nil || reflect.ValueOf(k).IsZero() {
		return nil, nil // Create may have no key; the inner collection decides
	}
	return k, nil
}

func (c *meteredColl) RevisionField() string { return docstore.DefaultRevisionField }

func (c *meteredColl) RunActions(ctx context.Context, actions []*driver.Action, opts *driver.RunActionsOptions) driver.ActionListError {
	c.m.pause(ctx)
	list := c.inner.Actions()
	atomic := false
	type pending struct {
		key  string
		size int
		kind driver.ActionKind
	}
	info := make([]pending, len(actions))
	for i, a := range actions {
		if a.InAtomicWrite && !atomic {
			list = list.AtomicWrites()
			atomic = true
		}
		key, _ := a.Key.(string)
		info[i] = pending{key: key, kind: a.Kind}
		switch a.Kind {
		case driver.Get:
			fps := make([]docstore.FieldPath, len(a.FieldPaths))
			for j, fp := range a.FieldPaths {
				fps[j] = docstore.FieldPath(strings.Join(fp, "."))
			}
			list.Get(a.Doc.Origin, fps...)
		case driver.Create:
			info[i].size = itemSize(a.Doc)
			list.Create(a.Doc.Origin)
		case driver.Replace:
			info[i].size = itemSize(a.Doc)
			list.Replace(a.Doc.Origin)
		case driver.Put:
			info[i].size = itemSize(a.Doc)
			list.Put(a.Doc.Origin)
		case driver.Delete:
			list.Delete(a.Doc.Origin)
		case driver.Update:
			mods := docstore.Mods{}
			for _, mod := range a.Mods {
				v := mod.Value
				if inc, ok := v.(driver.IncOp); ok {
					v = docstore.Increment(inc.Amount)
				}
				mods[docstore.FieldPath(strings.Join(mod.FieldPath, "."))] = v
			}
			list.Update(a.Doc.Origin, mods)
		}
	}
	if opts != nil && opts.BeforeDo != nil {
		list.BeforeDo(opts.BeforeDo)
	}
	err := list.Do(ctx)
	failed := map[int]error{}
	var ale docstore.ActionListError
	if errors.As(err, &ale) {
		for _, e := range ale {
			failed[e.Index] = e.Err
		}
	} else if err != nil {
		for i := range actions {
			failed[i] = err
		}
	}
	for i, p := range info {
		ferr, bad := failed[i]
		code := gcerrors.Code(ferr)
		conditional := bad && (code == gcerrors.FailedPrecondition || code == gcerrors.AlreadyExists || code == gcerrors.NotFound)
		if bad && !conditional {
			continue // not sent, or failed before it was billed
		}
		switch p.kind {
		case driver.Get:
			if !bad {
				c.m.get(p.key)
			}
		case driver.Update:
			c.m.mu.Lock()
			size := c.m.sizes[p.key]
			c.m.mu.Unlock()
			c.m.write(p.key, size, actions[i].InAtomicWrite, bad, false)
		default:
			c.m.write(p.key, p.size, actions[i].InAtomicWrite, bad, p.kind == driver.Delete)
		}
	}
	if err == nil {
		return nil
	}
	var out driver.ActionListError
	for i, e := range failed {
		out = append(out, struct {
			Index int
			Err   error
		}{actions[i].Index, e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

func (c *meteredColl) RunGetQuery(ctx context.Context, q *driver.Query) (driver.DocumentIterator, error) {
	c.m.pause(ctx)
	iq := c.inner.Query()
	for _, f := range q.Filters {
		iq = iq.Where(docstore.FieldPath(strings.Join(f.FieldPath, ".")), f.Op, f.Value)
	}
	if q.Offset > 0 {
		iq = iq.Offset(q.Offset)
	}
	if q.Limit > 0 {
		iq = iq.Limit(q.Limit)
	}
	if q.OrderByField != "" {
		dir := docstore.Descending
		if q.OrderAscending {
			dir = docstore.Ascending
		}
		iq = iq.OrderBy(q.OrderByField, dir)
	}
	if q.BeforeQuery != nil {
		iq = iq.BeforeQuery(q.BeforeQuery)
	}
	fps := make([]docstore.FieldPath, len(q.FieldPaths))
	for i, fp := range q.FieldPaths {
		fps[i] = docstore.FieldPath(strings.Join(fp, "."))
	}
	return &meteredIter{m: c.m, it: iq.Get(ctx, fps...)}, nil
}

type meteredIter struct {
	m           *Meter
	it          *docstore.DocumentIterator
	bytes, docs int64
	done        bool
}

func (it *meteredIter) Next(ctx context.Context, doc driver.Document) error {
	err := it.it.Next(ctx, doc.Origin)
	if err == nil {
		it.docs++
		key, _ := doc.GetField(keyField)
		it.m.mu.Lock()
		size, ok := it.m.sizes[toString(key)]
		it.m.mu.Unlock()
		if !ok {
			size = itemSize(doc)
		}
		it.bytes += int64(size)
	}
	if errors.Is(err, io.EOF) {
		it.finish()
	}
	return err
}

func (it *meteredIter) finish() {
	if !it.done {
		it.done = true
		it.m.query(it.bytes, it.docs)
	}
}

func (it *meteredIter) Stop() {
	it.finish()
	it.it.Stop()
}

func (it *meteredIter) As(i any) bool { return it.it.As(i) }

func toString(v any) string {
	s, _ := v.(string)
	return s
}

func (c *meteredColl) QueryPlan(*driver.Query) (string, error) { return "metered", nil }

func (c *meteredColl) RevisionToBytes(rev any) ([]byte, error) {
	s, err := c.inner.RevisionToString(rev)
	return []byte(s), err
}

func (c *meteredColl) BytesToRevision(b []byte) (any, error) {
	return c.inner.StringToRevision(string(b))
}

func (c *meteredColl) As(i any) bool                          { return c.inner.As(i) }
func (c *meteredColl) ErrorAs(err error, i any) bool          { return c.inner.ErrorAs(err, i) }
func (c *meteredColl) ErrorCode(err error) gcerrors.ErrorCode { return gcerrors.Code(err) }
func (c *meteredColl) Close() error                           { return c.inner.Close() }

// itemSize is the DynamoDB size of doc in bytes (see Meter).
func itemSize(doc driver.Document) int {
	e := &sizeEncoder{}
	if err := doc.Encode(e); err != nil {
		return 0
	}
	size := e.n
	if doc.HasField(docstore.DefaultRevisionField) {
		// The encoder counted whatever the revision holds now; count it
		// as gocloud's DynamoDB driver stores it, a 36-byte string.
		rev, _ := doc.GetField(docstore.DefaultRevisionField)
		size -= valueSize(rev)
		size += 36
	}
	return max(size, 0)
}

// valueSize is what sizeEncoder counts for a revision value.
func valueSize(v any) int {
	e := &sizeEncoder{}
	switch v := v.(type) {
	case nil:
		e.EncodeNil()
	case string:
		e.EncodeString(v)
	case int64:
		e.EncodeInt(v)
	case []byte:
		e.EncodeBytes(v)
	default:
		return 0
	}
	return e.n
}

// sizeEncoder sums DynamoDB's attribute sizes of what it encodes.
// The first map it meets is the item itself, which has no container
// overhead.
type sizeEncoder struct {
	n       int
	started bool
}

func (e *sizeEncoder) EncodeNil()            { e.n++ }
func (e *sizeEncoder) EncodeBool(bool)       { e.n++ }
func (e *sizeEncoder) EncodeString(s string) { e.n += len(s) }
func (e *sizeEncoder) EncodeInt(i int64)     { e.n += numberSize(float64(i)) }
func (e *sizeEncoder) EncodeUint(u uint64)   { e.n += numberSize(float64(u)) }
func (e *sizeEncoder) EncodeFloat(f float64) { e.n += numberSize(f) }
func (e *sizeEncoder) EncodeBytes(b []byte)  { e.n += len(b) }
func (e *sizeEncoder) EncodeList(n int) driver.Encoder {
	e.n += 3 + n
	return e
}
func (e *sizeEncoder) ListIndex(int) {}
func (e *sizeEncoder) EncodeMap(n int) driver.Encoder {
	if e.started {
		e.n += 3 + n
	}
	e.started = true
	return e
}
func (e *sizeEncoder) MapKey(k string) { e.n += len(k) }
func (e *sizeEncoder) EncodeSpecial(v reflect.Value) (bool, error) {
	if t, ok := v.Interface().(time.Time); ok {
		e.n += len(t.UTC().Format(time.RFC3339Nano))
		return true, nil
	}
	return false, nil
}

// numberSize is DynamoDB's size of a number: about one byte per two
// significant digits, plus one.
func numberSize(f float64) int {
	if f == 0 {
		return 1
	}
	s := strconv.FormatFloat(math.Abs(f), 'f', -1, 64)
	digits := len(strings.Trim(strings.Replace(s, ".", "", 1), "0"))
	return (digits+1)/2 + 1
}
