package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
)

// TestConcurrentWorkersE2E runs many workers against one durable consumer
// over HTTP while events are being published, each worker misbehaving at
// random the ways real workers do: failing batches, crashing with a lease
// (a short visibility, then a new identity), acknowledging twice, and
// acknowledging a batch it abandoned long ago. It checks the promises of
// the durable-consumer API that must survive all of that:
//
//   - every published event is delivered and committed;
//   - the committed cursor never moves backward as any one worker sees it;
//   - the leases whose acknowledgements answered "committed" tile the
//     positions under the final cursor exactly, so no stale acknowledgement
//     committed anything and the cursor never passed an unacknowledged
//     batch;
//   - a redelivered lease starts at the same sequence and carries a prefix
//     of the events it held before (a reclaim by a worker with a smaller
//     limit splits it; the rest becomes a new lease);
//   - the in-flight count never passes 1,000.
func TestConcurrentWorkersE2E(t *testing.T) {
	t.Parallel()
	const (
		total      = 10_000
		batch      = 100
		workers    = 16
		publishers = 2
	)
	c := start(t)
	id := c.create(t, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := &concurrencyRun{c: c, dest: id, total: total, cancel: cancel, backlog: make(chan struct{}),
		committed: map[string]committedLease{}, seen: map[string]seenLease{}, eids: map[string]int{}}

	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() { run.publish(ctx, p, publishers, batch) })
	}
	// Workers start once a backlog has built up, so that together they
	// can fill the in-flight window (16 workers × up to 100 events).
	select {
	case <-run.backlog:
	case <-ctx.Done():
	}
	for w := range workers {
		wg.Go(func() { run.work(ctx, w) })
	}
	wg.Go(func() { run.sample(ctx) })
	wg.Wait()

	run.mu.Lock()
	defer run.mu.Unlock()
	require.Empty(t, run.errs, "first errors: %v", first(run.errs, 10))
	require.Equal(t, total, len(run.eids), "distinct events committed")

	// The committed leases tile [1, cursor] with no gap and no overlap.
	spans := make([]committedLease, 0, len(run.committed))
	for _, cl := range run.committed {
		spans = append(spans, cl)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	next := int64(1)
	for _, s := range spans {
		require.Equal(t, next, s.start, "committed leases must tile the positions: gap or overlap at %d", next)
		next = s.end + 1
	}
	last := next - 1
	require.GreaterOrEqual(t, last, int64(total))

	d := c.getDest(t, id)
	require.Equal(t, cloudevent.FormatSequence(last), d.Committed, "cursor is the last position of the run")
	require.Zero(t, d.InFlight)
	require.Equal(t, http.StatusNoContent, c.pull(t, id, "workerId", "final").Status)
	require.LessOrEqual(t, run.maxInFlight, int64(1000))

	t.Logf("positions %d, leases committed %d, stale acks %d, requeued %d, reclaimed %d, 429s %d, max in_flight sampled %d (%d samples), duplicates %d",
		last, len(run.committed), run.stats.stale, run.stats.requeued, run.stats.reclaimed, run.stats.full, run.maxInFlight, run.samples, last-int64(total))
}

// committedLease is a lease whose acknowledgement answered "committed".
type committedLease struct {
	start, end int64 // positions, inclusive
	generation int64
}

// seenLease is what a lease held when last delivered.
type seenLease struct {
	start int64    // first position
	eids  []string // event ids in order
}

// concurrencyRun is the shared state of TestConcurrentWorkersE2E.
type concurrencyRun struct {
	c      *client
	dest   string
	total  int
	cancel context.CancelFunc

	published atomic.Int64
	backlog   chan struct{} // closed when backlogSize events are published

	mu          sync.Mutex
	errs        []string
	committed   map[string]committedLease // by lease id
	seen        map[string]seenLease      // by lease id
	eids        map[string]int            // committed event ids → times
	maxInFlight int64
	samples     int
	stats       struct{ stale, requeued, reclaimed, full int }
}

// fail records a broken promise and stops the run.
func (r *concurrencyRun) fail(format string, args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	r.cancel()
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// publish sends this publisher's share of the events in batches.
func (r *concurrencyRun) publish(ctx context.Context, p, publishers, batch int) {
	for b := p; b*batch < r.total; b += publishers {
		events := make([]map[string]any, batch)
		for i := range events {
			n := b*batch + i
			events[i] = ev("load.tick", "/load/"+strconv.Itoa(n%10), map[string]string{"eid": fmt.Sprintf("e-%05d", n)})
		}
		for {
			if ctx.Err() != nil {
				return
			}
			res, err := r.c.call("POST", "/api/v1beta/events/batch", map[string]any{"events": events})
			if err != nil {
				r.fail("publish: %v", err)
				return
			}
			if res.Status != http.StatusOK {
				r.fail("publish: status %d: %s", res.Status, res.Body)
				return
			}
			var out struct {
				Results []publishResult `json:"results"`
			}
			if err := json.Unmarshal(res.Body, &out); err != nil || len(out.Results) != batch {
				r.fail("publish: bad body %.200s", res.Body)
				return
			}
			for i, pr := range out.Results {
				if !pr.Success {
					r.fail("publish: event %d failed: %s", i, pr.FailureReason)
					return
				}
			}
			break
		}
		if r.published.Add(int64(batch)) == backlogSize {
			close(r.backlog)
		}
	}
}

// backlogSize is how many events are published before workers start.
const backlogSize = 3000

// sample reads the destination's in_flight until the run ends.
func (r *concurrencyRun) sample(ctx context.Context) {
	for ctx.Err() == nil {
		res, err := r.c.call("GET", "/v1/event-destinations/"+r.dest, nil)
		if err != nil || res.Status != http.StatusOK {
			if ctx.Err() == nil {
				r.fail("sample: %v %v", err, res)
			}
			return
		}
		var d destination
		if err := json.Unmarshal(res.Body, &d); err != nil {
			r.fail("sample: %v", err)
			return
		}
		r.mu.Lock()
		r.samples++
		r.maxInFlight = max(r.maxInFlight, d.InFlight)
		r.mu.Unlock()
		if d.InFlight > 1000 {
			r.fail("in_flight %d passed 1000", d.InFlight)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// pulled is a lease as a worker received it.
type pulled struct {
	lease
	start, end int64
	eids       []string
}

// worker is one simulated worker process.
type worker struct {
	r           *concurrencyRun
	n           int
	rng         *rand.Rand
	incarnation int
	cursor      int64    // the highest committed cursor this worker has seen
	zombies     []pulled // leases abandoned by a crashed incarnation
}

func (w *worker) id() string { return fmt.Sprintf("w%d-%d", w.n, w.incarnation) }

// work runs worker n until every event is committed.
func (r *concurrencyRun) work(ctx context.Context, n int) {
	w := &worker{r: r, n: n, rng: rand.New(rand.NewPCG(uint64(n), 42))}
	for ctx.Err() == nil {
		w.step(ctx)
	}
}

// step is one pull and what the worker does with it.
func (w *worker) step(ctx context.Context) {
	// Now and then a crashed incarnation's lease is acknowledged late: it
	// commits if nobody took it over, else it is stale.
	if len(w.zombies) > 0 && w.rng.IntN(4) == 0 {
		z := w.zombies[0]
		w.zombies = w.zombies[1:]
		if out, ok := w.ack(z, "ok"); ok && out != "committed" && out != "stale" {
			w.r.fail("%s: late ack answered %q", w.id(), out)
		}
	}
	behaviour := w.rng.IntN(100)
	visibility := 60
	if behaviour < 10 {
		visibility = 1 // this incarnation will crash with the lease
	}
	l, status := w.pull(ctx, 50+w.rng.IntN(51), visibility)
	switch status {
	case http.StatusOK:
	case http.StatusNoContent, http.StatusTooManyRequests:
		time.Sleep(time.Duration(1+w.rng.IntN(4)) * time.Millisecond)
		return
	default:
		return // already reported
	}
	switch {
	case behaviour < 10: // crash: a new identity, the lease left to expire
		w.incarnation++
		if w.rng.IntN(2) == 0 {
			w.zombies = append(w.zombies, *l)
		}
	case behaviour < 20: // the batch failed; maybe reported twice
		if out, ok := w.ack(*l, "failed"); ok && out != "requeued" {
			w.r.fail("%s: failed answered %q", w.id(), out)
		}
		if w.rng.IntN(2) == 0 {
			if out, ok := w.ack(*l, "failed"); ok && out != "requeued" && out != "stale" {
				w.r.fail("%s: failed again answered %q", w.id(), out)
			}
		}
	case behaviour < 30: // acknowledged twice: the repeat answers as the first
		if out, ok := w.ack(*l, "ok"); ok && out != "committed" {
			w.r.fail("%s: ok answered %q", w.id(), out)
		}
		if out, ok := w.ackAgain(*l, "ok"); ok && out != "committed" {
			w.r.fail("%s: ok again answered %q", w.id(), out)
		}
	default:
		if out, ok := w.ack(*l, "ok"); ok && out != "committed" {
			w.r.fail("%s: ok answered %q", w.id(), out)
		}
	}
}

// pull asks for a lease and checks every answer but 200's events.
func (w *worker) pull(ctx context.Context, limit, visibility int) (*pulled, int) {
	q := url.Values{"workerId": {w.id()}, "limit": {strconv.Itoa(limit)}, "visibility": {strconv.Itoa(visibility)}}
	res, err := w.r.c.call("POST", pullPath(w.r.dest, q), nil)
	if err != nil {
		if ctx.Err() == nil {
			w.r.fail("%s: pull: %v", w.id(), err)
		}
		return nil, 0
	}
	switch res.Status {
	case http.StatusOK:
	case http.StatusNoContent:
		return nil, res.Status
	case http.StatusTooManyRequests:
		var e errorBody
		if err := json.Unmarshal(res.Body, &e); err != nil || e.InFlight == nil || *e.InFlight != 1000 || res.Header.Get("Retry-After") == "" {
			w.r.fail("%s: bad 429: %s (Retry-After %q)", w.id(), res.Body, res.Header.Get("Retry-After"))
		}
		w.r.mu.Lock()
		w.r.stats.full++
		w.r.mu.Unlock()
		return nil, res.Status
	default:
		w.r.fail("%s: pull status %d: %s", w.id(), res.Status, res.Body)
		return nil, res.Status
	}
	var p pulled
	if err := json.Unmarshal(res.Body, &p.lease); err != nil || len(p.Events) == 0 || len(p.Events) > 100 {
		w.r.fail("%s: bad lease: %.300s", w.id(), res.Body)
		return nil, 0
	}
	for i, raw := range p.Events {
		var e struct {
			ceHead
			Data struct {
				EID string `json:"eid"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			w.r.fail("%s: bad event: %v", w.id(), err)
			return nil, 0
		}
		pos, err := cloudevent.ParseSequence(e.Sequence)
		if err != nil {
			w.r.fail("%s: %v", w.id(), err)
			return nil, 0
		}
		if i == 0 {
			p.start = pos
		} else if pos != p.end+1 {
			w.r.fail("%s: lease %s is not contiguous: %d after %d", w.id(), p.LeaseID, pos, p.end)
		}
		p.end = pos
		p.eids = append(p.eids, e.Data.EID)
	}
	w.r.recordSeen(&p)
	return &p, http.StatusOK
}

// recordSeen checks that a redelivered lease starts where it started and
// holds a prefix of what it held before: a reclaim at a smaller limit splits
// a lease, and its first part keeps the lease id.
func (r *concurrencyRun) recordSeen(p *pulled) {
	s := seenLease{start: p.start, eids: p.eids}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.seen[p.LeaseID]; ok {
		r.stats.reclaimed++
		if prev.start != s.start || len(s.eids) > len(prev.eids) || !slices.Equal(prev.eids[:len(s.eids)], s.eids) {
			r.errs = append(r.errs, fmt.Sprintf("lease %s changed on redelivery: %d %v then %d %v", p.LeaseID, prev.start, prev.eids, s.start, s.eids))
		}
	}
	r.seen[p.LeaseID] = s
}

// ack acknowledges p and checks the cursor; ok is false after a transport
// or status failure (already reported).
func (w *worker) ack(p pulled, status string) (outcome string, ok bool) {
	return w.acknowledge(p, status, false)
}

// ackAgain repeats an acknowledgement of p that was applied: a committed
// answer is the first commit remembered, not a second one.
func (w *worker) ackAgain(p pulled, status string) (outcome string, ok bool) {
	return w.acknowledge(p, status, true)
}

func (w *worker) acknowledge(p pulled, status string, repeat bool) (outcome string, ok bool) {
	res, err := w.r.c.call("POST", "/v1/event-destinations/"+w.r.dest+"/acknowledge",
		map[string]any{"leaseId": p.LeaseID, "generation": p.Generation, "status": status})
	if err != nil {
		w.r.fail("%s: ack: %v", w.id(), err)
		return "", false
	}
	if res.Status != http.StatusOK {
		w.r.fail("%s: ack status %d: %s", w.id(), res.Status, res.Body)
		return "", false
	}
	var a ackResult
	if err := json.Unmarshal(res.Body, &a); err != nil {
		w.r.fail("%s: ack body: %v", w.id(), err)
		return "", false
	}
	cursor, err := cloudevent.ParseSequence(a.Committed)
	if err != nil {
		w.r.fail("%s: ack cursor: %v", w.id(), err)
		return "", false
	}
	if cursor < w.cursor {
		w.r.fail("%s: committed moved backward from %d to %d", w.id(), w.cursor, cursor)
	}
	w.cursor = max(w.cursor, cursor)

	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	switch a.Status {
	case "committed":
		if prev, dup := w.r.committed[p.LeaseID]; repeat {
			if !dup || prev.generation != p.Generation {
				w.r.errs = append(w.r.errs, fmt.Sprintf("lease %s: a repeated ok answered committed for generation %d, which was not committed", p.LeaseID, p.Generation))
			}
			break
		} else if dup {
			w.r.errs = append(w.r.errs, fmt.Sprintf("lease %s committed twice (generations %d and %d)", p.LeaseID, prev.generation, p.Generation))
		}
		w.r.committed[p.LeaseID] = committedLease{start: p.start, end: p.end, generation: p.Generation}
		for _, e := range p.eids {
			w.r.eids[e]++
		}
		if len(w.r.eids) == w.r.total {
			w.r.cancel() // everything is committed
		}
	case "stale":
		w.r.stats.stale++
	case "requeued":
		w.r.stats.requeued++
	}
	return a.Status, true
}
