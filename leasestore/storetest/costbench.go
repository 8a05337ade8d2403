package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/docstore"

	"github.com/heraldevents/herald/leasestore"
)

// CostOptions shape RunCostBenchmarks.
type CostOptions struct {
	// Latency is the Meter's simulated round trip per store call (see
	// Meter.Latency); 0 for a networked backend, about a millisecond for
	// memdocstore so that racing workers conflict as they would over a
	// network.
	Latency time.Duration
	// Events is how many events each scenario delivers per benchmark
	// iteration (default 2,000; the queue scenarios take a quarter).
	Events int
}

// RunCostBenchmarks runs the store's hot paths on the harness that
// newHarness makes, through a Meter, and reports per delivered event what
// DynamoDB and Firestore would bill (see Meter):
//
//   - wu/event, ru/event: DynamoDB write and read units;
//   - hot-wu/event, hot-writes/event: the units and the writes of the key
//     written most often (DynamoDB throttles one partition at 1,000 write units
//     per second; Firestore advises about one write per second per
//     document, so 1/hot-writes is the events per second one consumer can
//     sustain there);
//   - failed/event: conditional writes that lost a race (billed, and each
//     one a retry);
//   - fs-ops/event: Firestore document writes and deletes, fs-reads/event
//     its document reads;
//   - fs-deletes/event: of fs-ops, the deletes (Firestore prices them
//     apart);
//   - stored-B/published-B: bytes of items written per byte of event body
//     published;
//   - $ddb/Mevents, $fs/Mevents: US dollars per million events at the list
//     prices below (storage and network not included).
//
// Scenarios, on varied JSON events of about 1 KiB (RealisticEvents):
// Pull100/workers=1 and =16 (durable-consumer pulls of 100 acknowledged whole, 16
// workers on two store clients), Queue/streams=1 and =8 (a durable queue,
// each stream a session pulling up to streamBatch events and acknowledging
// every event on its own through a Batcher, as Herald's streams do), and
// InFlight=10 and =1000 (leases of 10 events, that many
// events held at once, acknowledged in random order).
func RunCostBenchmarks(b *testing.B, newHarness HarnessMaker, o CostOptions) {
	h, err := newHarness(b.Context(), b)
	if err != nil {
		b.Fatalf("make harness: %v", err)
	}
	if o.Events <= 0 {
		o.Events = 2000
	}
	run := func(name string, f func(b *testing.B, cb *costBed)) {
		b.Run(name, func(b *testing.B) {
			m := NewMeter()
			m.Latency = o.Latency
			cb := &costBed{meter: m, events: o.Events, bodies: RealisticEvents(4096, 1)}
			cb.bundle = setup(b, meteredHarness{h, m}, setupOptions{clients: 2})
			for b.Loop() {
				f(b, cb)
			}
			cb.report(b)
		})
	}
	run("Pull100/workers=1", func(b *testing.B, cb *costBed) { cb.pullAck(b, 1, 100) })
	run("Pull100/workers=16", func(b *testing.B, cb *costBed) { cb.pullAck(b, 16, 100) })
	run("Queue/streams=1", func(b *testing.B, cb *costBed) { cb.queue(b, 1) })
	run("Queue/streams=8", func(b *testing.B, cb *costBed) { cb.queue(b, 8) })
	run("InFlight=10", func(b *testing.B, cb *costBed) { cb.inFlight(b, 10) })
	run("InFlight=1000", func(b *testing.B, cb *costBed) { cb.inFlight(b, 1000) })
}

// List prices the dollar figures use (US dollars, published by the
// vendors in 2025): DynamoDB on-demand in us-east-1 since the price cut of
// 1 November 2024; Firestore Native mode in a multi-region location (nam5,
// eur3; a single region such as us-central1 is half that).
const (
	DynamoDBPerMillionWriteUnits = 0.625
	DynamoDBPerMillionReadUnits  = 0.125
	FirestorePer100kDocWrites    = 0.18
	FirestorePer100kDocDeletes   = 0.02
	FirestorePer100kDocReads     = 0.06
)

// DynamoDBDollars is what r's traffic costs on DynamoDB on-demand.
func DynamoDBDollars(r Report) float64 {
	return float64(r.WriteUnits)/1e6*DynamoDBPerMillionWriteUnits + float64(r.ReadUnits)/1e6*DynamoDBPerMillionReadUnits
}

// FirestoreDollars is what r's traffic costs on Firestore: every write and
// delete request counts as a document operation (a failed conditional
// write too, which is a conservative reading), every document read as a
// read.
func FirestoreDollars(r Report) float64 {
	return float64(r.Writes-r.Deletes)/1e5*FirestorePer100kDocWrites + float64(r.Deletes)/1e5*FirestorePer100kDocDeletes +
		float64(r.Reads)/1e5*FirestorePer100kDocReads
}

// meteredHarness wraps every collection its harness makes with a Meter.
type meteredHarness struct {
	h Harness
	m *Meter
}

func (mh meteredHarness) MakeCollections(ctx context.Context, t testing.TB, n int) ([]*docstore.Collection, error) {
	colls, err := mh.h.MakeCollections(ctx, t, n)
	if err != nil {
		return nil, err
	}
	out := make([]*docstore.Collection, len(colls))
	wrapped := map[*docstore.Collection]*docstore.Collection{}
	for i, c := range colls {
		if w, ok := wrapped[c]; ok {
			out[i] = w // one client handed out twice stays one client
			continue
		}
		out[i] = mh.m.Wrap(c)
		wrapped[c] = out[i]
	}
	return out, nil
}

// costBed is one scenario's state: the bundle, its meter, and what was
// delivered and published while metering.
type costBed struct {
	*bundle
	meter     *Meter
	events    int
	bodies    [][]byte
	next      atomic.Int64 // bodies handed to the source so far
	delivered atomic.Int64 // events settled (acknowledged) while metered
	published atomic.Int64 // body bytes of the events delivered
	elapsed   time.Duration
	queueID   string
	src       *ScriptedSource
	reset     bool
}

// publish adds n events to the source. Bytes are counted as published
// when they are delivered (see took), so that events left in the source
// when a scenario stops do not count.
func (cb *costBed) publish(n int) {
	batch := make([][]byte, n)
	for i := range batch {
		body := cb.bodies[int(cb.next.Add(1))%len(cb.bodies)]
		batch[i] = body
	}
	cb.src.Add(batch...)
}

// begin starts metering on the first iteration (after the scenario's
// consumer exists).
func (cb *costBed) begin() {
	if cb.src == nil {
		cb.src = NewScriptedSource()
	}
	if !cb.reset {
		cb.reset = true
		cb.meter.Reset()
	}
}

// took counts the body bytes of events delivered.
func (cb *costBed) took(events [][]byte) {
	var n int64
	for _, e := range events {
		n += int64(len(e))
	}
	cb.published.Add(n)
}

func (cb *costBed) pullAck(b *testing.B, workers, limit int) {
	cb.begin()
	start := time.Now()
	var wg sync.WaitGroup
	var done atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			store := cb.stores[w%len(cb.stores)]
			worker := "bench-" + strconv.Itoa(w)
			for done.Load() < int64(cb.events) && !b.Failed() {
				cb.publish(limit)
				l, err := cb.tryPull(store, worker, limit, cb.src)
				var full *leasestore.WindowFullError
				if errors.As(err, &full) {
					// 16 workers of 100 can fill the window of 1,000:
					// wait for the others' acknowledgements.
					_ = sleep(cb.ctx, time.Millisecond)
					continue
				}
				if err != nil {
					b.Errorf("pull: %v", err)
					return
				}
				if l == nil {
					continue
				}
				r, err := store.Acknowledge(cb.ctx, leasestore.AckParams{
					Consumer: cb.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK,
				})
				if err != nil || r.Outcome != leasestore.OutcomeCommitted {
					b.Errorf("acknowledge: %v, %v", r, err)
					return
				}
				cb.took(l.Events)
				done.Add(int64(len(l.Events)))
			}
		}()
	}
	wg.Wait()
	cb.delivered.Add(done.Load())
	cb.elapsed += time.Since(start)
}

// streamBatch is how many events a stream takes per pull in the queue
// scenarios: delivery.DefaultStreamBatch.
const streamBatch = 100

func (cb *costBed) queue(b *testing.B, streams int) {
	if cb.queueID == "" {
		cb.queueID = cb.newQueue(b, leasestore.TypeDurableQueue, nil)
		for s := range streams {
			cb.attach(b, cb.queueID, "stream-"+strconv.Itoa(s))
		}
	}
	cb.begin()
	start := time.Now()
	var wg sync.WaitGroup
	var done atomic.Int64
	target := int64(max(cb.events/4, 1))
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			store := cb.stores[s%len(cb.stores)]
			session := "stream-" + strconv.Itoa(s)
			bat := store.NewBatcher(cb.queueID, func(r leasestore.SettleResult, err error) {
				if err != nil {
					b.Errorf("settle: %v", err)
				}
			})
			for done.Load() < target && !b.Failed() {
				cb.publish(streamBatch)
				ls, err := cb.tryPullEvents(store, cb.queueID, session, streamBatch, cb.src)
				if err != nil {
					b.Errorf("pull events: %v", err)
					return
				}
				// Every event is acknowledged on its own, as a stream's
				// client does; the Batcher groups what arrives together.
				for _, l := range ls {
					bat.Add(cb.ctx, []leasestore.EventRef{{LeaseID: l.ID, Generation: l.Generation}}, nil)
					cb.took(l.Events)
					done.Add(1)
				}
				if err := bat.Wait(cb.ctx); err != nil {
					b.Errorf("settle: %v", err)
					return
				}
			}
			if err := bat.Close(cb.ctx); err != nil {
				b.Errorf("settle: %v", err)
			}
		}()
	}
	wg.Wait()
	cb.delivered.Add(done.Load())
	cb.elapsed += time.Since(start)
}

// inFlight keeps window events leased in leases of 10, each held by its
// own worker, and acknowledges a random held lease before pulling the
// next.
func (cb *costBed) inFlight(b *testing.B, window int) {
	const per = 10
	if cb.src == nil {
		cb.src = NewScriptedSource()
	}
	rng := rand.New(rand.NewPCG(uint64(window), 7))
	slots := max(window/per, 1)
	held := make([]*leasestore.Lease, slots)
	pull := func(slot int) {
		cb.publish(per)
		l, err := cb.tryPull(cb.store, "slot-"+strconv.Itoa(slot), per, cb.src)
		if err != nil || l == nil {
			b.Fatalf("pull: %v, %v", l, err)
		}
		held[slot] = l
	}
	for i := range held {
		if held[i] == nil {
			pull(i)
		}
	}
	// Measure the steady state: the window is full from here on.
	cb.begin()
	start := time.Now()
	var done int64
	for done < int64(cb.events) {
		i := rng.IntN(slots)
		l := held[i]
		r, err := cb.store.Acknowledge(cb.ctx, leasestore.AckParams{
			Consumer: cb.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK,
		})
		if err != nil || r.Outcome != leasestore.OutcomeCommitted {
			b.Fatalf("acknowledge: %v, %v", r, err)
		}
		cb.took(l.Events)
		done += int64(len(l.Events))
		pull(i)
	}
	cb.delivered.Add(done)
	cb.elapsed += time.Since(start)
}

func (cb *costBed) report(b *testing.B) {
	r := cb.meter.Report()
	n := float64(cb.delivered.Load())
	if n == 0 {
		b.Fatal("no event was delivered")
	}
	per := func(v int64) float64 { return float64(v) / n }
	b.ReportMetric(per(r.WriteUnits), "wu/event")
	b.ReportMetric(per(r.ReadUnits), "ru/event")
	b.ReportMetric(per(r.Hottest.WriteUnits), "hot-wu/event")
	b.ReportMetric(per(r.Hottest.Writes), "hot-writes/event")
	b.ReportMetric(per(r.FailedWrites), "failed/event")
	b.ReportMetric(per(r.Writes), "fs-ops/event")
	b.ReportMetric(per(r.Reads), "fs-reads/event")
	b.ReportMetric(per(r.Deletes), "fs-deletes/event")
	b.ReportMetric(float64(r.BytesWritten)/float64(max(cb.published.Load(), 1)), "stored-B/published-B")
	b.ReportMetric(DynamoDBDollars(r)*1e6/n, "$ddb/Mevents")
	b.ReportMetric(FirestoreDollars(r)*1e6/n, "$fs/Mevents")
	b.ReportMetric(n/cb.elapsed.Seconds(), "events/s")
	var top []string
	for _, k := range cb.meter.TopKeys(3) {
		top = append(top, fmt.Sprintf("%s (%d writes, %d wu)", keyKind(k.Key), k.Writes, k.WriteUnits))
	}
	b.Logf("%d events; most written keys: %s", int64(n), strings.Join(top, ", "))
}

// keyKind shortens a record key to its kind prefix and a hint of the
// rest, for the benchmark's log.
func keyKind(key string) string {
	if i := strings.IndexByte(key, ':'); i > 0 {
		return key[:i+1] + "…"
	}
	return key
}

// RealisticEvents returns n CloudEvents-shaped JSON events of about 1 KiB
// (700–1,400 bytes), varied the way real traffic is (ids, timestamps,
// names, amounts, free text), from a fixed seed so that runs compare. Use
// these, not repeated characters, wherever a figure depends on what
// compresses.
func RealisticEvents(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	words := strings.Fields(`order shipped warehouse north south parcel express customer
		delayed priority return invoice payment refund card wallet fragile glass
		electronics garden kitchen bundle discount loyalty member gold silver
		address street avenue city postal region carrier tracking label scanned
		hub depot van driver signature doorstep neighbour locker pickup window`)
	first := strings.Fields("Ada Grace Linus Barbara Ken Radia Donald Frances Edsger Margaret Alan Hedy")
	last := strings.Fields("Lovelace Hopper Torvalds Liskov Thompson Perlman Knuth Allen Dijkstra Hamilton Turing Lamarr")
	types := strings.Fields("com.example.order.created com.example.order.shipped com.example.payment.captured com.example.parcel.scanned")
	hex := func(k int) string {
		const digits = "0123456789abcdef"
		var sb strings.Builder
		for range k {
			sb.WriteByte(digits[rng.IntN(16)])
		}
		return sb.String()
	}
	text := func(k int) string {
		ws := make([]string, k)
		for i := range ws {
			ws[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(ws, " ")
	}
	base := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	out := make([][]byte, n)
	for i := range out {
		at := base.Add(time.Duration(rng.Int64N(int64(30 * 24 * time.Hour))))
		var items []string
		for range 1 + rng.IntN(5) {
			items = append(items, fmt.Sprintf(`{"sku":"SKU-%05d","name":%q,"quantity":%d,"unitPrice":%d.%02d}`,
				rng.IntN(100000), text(1+rng.IntN(3)), 1+rng.IntN(9), rng.IntN(500), rng.IntN(100)))
		}
		name := first[rng.IntN(len(first))] + " " + last[rng.IntN(len(last))]
		out[i] = fmt.Appendf(nil, `{"specversion":"1.0","id":"%s-%s-%s-%s-%s","source":"/shops/%s/region-%d","type":%q,`+
			`"time":%q,"publishedat":%q,"datacontenttype":"application/json","subject":"orders/%d",`+
			`"data":{"orderId":"ORD-%08d","customer":{"id":"CUS-%06d","name":%q,"email":"%s@example.com",`+
			`"address":{"street":"%d %s street","city":%q,"postalCode":"%05d","country":"%s"}},`+
			`"items":[%s],"total":%d.%02d,"currency":"EUR","notes":%q,"traceparent":"00-%s-%s-01"}}`,
			hex(8), hex(4), hex(4), hex(4), hex(12), text(1), rng.IntN(40), types[rng.IntN(len(types))],
			at.Format(time.RFC3339Nano), at.Add(time.Duration(rng.IntN(900))*time.Millisecond).Format(time.RFC3339Nano),
			rng.IntN(1_000_000), rng.IntN(100_000_000), rng.IntN(1_000_000), name,
			strings.ToLower(strings.ReplaceAll(name, " ", ".")), 1+rng.IntN(400), text(1), text(1),
			rng.IntN(100000), []string{"DE", "FR", "NL", "SE", "IT", "ES"}[rng.IntN(6)],
			strings.Join(items, ","), rng.IntN(5000), rng.IntN(100), text(8+rng.IntN(30)), hex(32), hex(16))
	}
	return out
}
