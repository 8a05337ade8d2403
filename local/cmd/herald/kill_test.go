package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/emulators"
)

// The kill tests run two local-adapter processes (this command, built
// once) on one PostgreSQL store and one broker, share one durable consumer
// and one durable queue between them, publish to both, SIGKILL a process
// three times at random points of the run (B, A, B) and restart it at
// once, and then check what the durable-consumer API and
// the notifications API promise:
//
//   - every event answered success:true is committed (the consumer's
//     cursor passed its position, nothing in flight) or dead-lettered, and
//     reached a stream of the queue or was dead-lettered;
//   - no lease generation is committed twice, no position is committed
//     twice;
//   - the committed cursor, read again and again on both processes, never
//     moves backward, and the in-flight window never passes 1,000.
//
// The figures (throughput, duplicates, recovery time, statements and bytes
// of the store) are logged; docs/backends.md quotes them.

const (
	killEvents     = 2000 // events published, half through each process
	killBatch      = 20   // events per publish request
	killWorkers    = 16   // pull workers of the durable consumer
	killStreams    = 4    // SSE streams of the durable queue per process
	killVisibility = 2    // seconds; abandoned leases come back after it
	killToken      = "kill-test-token-0123456789"
	// killAckDeadline is the brokers' ack deadline: what the killed
	// process had taken from the broker and not yet written into a lease
	// comes back after it (RabbitMQ returns it at once, when the
	// connection drops).
	killAckDeadline = "10s"
	killTimeout     = 150 * time.Second // the whole run; it takes well under a minute
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binary herald built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// killRun is one run's shared state and records.
type killRun struct {
	t        *testing.T
	procs    [2]*proc
	consumer string
	queue    string

	mu          sync.Mutex
	published   map[int]bool      // n answered success:true
	delivered   map[string]int    // consumer position → n
	commits     map[string]int    // "lease/generation" → committed answers
	posCommits  map[string]int    // consumer position → committed answers
	streamed    map[int]int       // n → deliveries on the queue's streams
	acks        map[string]int    // ack outcome → count
	monitorErrs []string          // cursor or window violations
	maxInFlight map[string]int64  // destination → highest in_flight seen
	lastCursor  map[string]string // destination → last committed seen
	lastCommit  time.Time         // the consumer's last committed acknowledgement
	committedN  int               // events in committed acknowledgements
	ninetyAt    time.Time         // when they reached 90% of the events
	lastStream  time.Time         // the queue's last first delivery of an event
	publishDone atomic.Bool
	stop        atomic.Bool
}

// eventN reads the event number a published message carries.
type pulled struct {
	LeaseID    string `json:"leaseId"`
	Generation int64  `json:"generation"`
	Events     []struct {
		Sequence string `json:"sequence"`
		Data     struct {
			N int `json:"n"`
		} `json:"data"`
	} `json:"events"`
}

type destination struct {
	Committed *string `json:"committed"`
	InFlight  int64   `json:"in_flight"`
	Requeued  int64   `json:"requeued"`
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func randN(n int64) int64 {
	v, _ := rand.Int(rand.Reader, big.NewInt(n))
	return v.Int64()
}

// TestKillRabbitMQ runs the kill test on RabbitMQ.
func TestKillRabbitMQ(t *testing.T) {
	server := emulators.RabbitMQ(t)
	exchange := "herald-kill-" + randomHex(6)
	t.Cleanup(func() {
		c, err := amqp.Dial(server)
		if err != nil {
			t.Logf("delete exchange %s: %v", exchange, err)
			return
		}
		defer c.Close()
		if ch, err := c.Channel(); err == nil {
			_ = ch.ExchangeDelete(exchange, false, false)
		}
	})
	runKill(t, "rabbit://"+exchange+"?url="+url.QueryEscape(server)+"&ackdeadline="+killAckDeadline)
}

// TestKillNATS runs the kill test on NATS JetStream.
func TestKillNATS(t *testing.T) {
	server := emulators.NATS(t)
	stream := "HERALD_KILL_" + randomHex(6)
	t.Cleanup(func() {
		nc, err := nats.Connect(server)
		if err != nil {
			t.Logf("delete stream %s: %v", stream, err)
			return
		}
		defer nc.Close()
		if js, err := jetstream.New(nc); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = js.DeleteStream(ctx, stream)
		}
	})
	runKill(t, server+"/"+stream+"?ackdeadline="+killAckDeadline)
}

func runKill(t *testing.T, topicURL string) {
	bin := herald(t)
	db := emulators.PostgreSQL(t)
	storeURL := db + "?table=herald"
	env := []string{
		"HERALD_DEV_TOKEN=" + killToken,
		"HERALD_TOPIC_URL=" + topicURL,
		"HERALD_STORE_URL=" + storeURL,
		"HERALD_RECEIVE_WAIT=100ms",
		"HERALD_SSE_ACK_DELAY=0s",
	}
	ctx, cancel := context.WithTimeout(t.Context(), killTimeout)
	defer cancel()
	r := &killRun{
		t:           t,
		published:   map[int]bool{},
		delivered:   map[string]int{},
		commits:     map[string]int{},
		posCommits:  map[string]int{},
		streamed:    map[int]int{},
		acks:        map[string]int{},
		maxInFlight: map[string]int64{},
		lastCursor:  map[string]string{},
	}
	for i := range r.procs {
		r.procs[i] = newProc(t, fmt.Sprintf("herald-%c", 'A'+i), bin, env)
		r.procs[i].start(ctx)
	}
	a := r.procs[0].base

	var created struct {
		ID string `json:"id"`
	}
	status, err := call(ctx, a, "POST", "/v1/event-destinations", map[string]any{"type": "DURABLE_CONSUMER"}, &created)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
	r.consumer = created.ID
	r.queue = "kill-q-" + randomHex(4)
	status, err = call(ctx, a, "POST", "/api/v1beta/queues/durable", map[string]any{"queue_id": r.queue}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)

	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { r.monitor(ctx) })
	for i := range killWorkers {
		wg.Go(func() { r.worker(ctx, i) })
	}
	for i := range 2 * killStreams {
		wg.Go(func() { r.stream(ctx, i) })
	}
	var pubs sync.WaitGroup
	for p := range 2 {
		pubs.Go(func() { r.publish(ctx, p) })
	}

	// Kill B once 40% of the events are published, then A and B again at
	// random points while the workers and streams run; restart each at once.
	for r.countPublished() < killEvents*4/10 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	var killedAt time.Time
	var recoveries []time.Duration
	for k, victim := range []int{1, 0, 1} {
		if k > 0 {
			time.Sleep(time.Second + time.Duration(randN(2000))*time.Millisecond)
		}
		killedAt = time.Now()
		r.procs[victim].kill()
		r.procs[victim].start(ctx)
		recoveries = append(recoveries, time.Since(killedAt))
	}

	pubs.Wait()
	r.publishDone.Store(true)
	published := time.Since(start)
	for !r.settled(ctx) {
		if ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.stop.Store(true)
	wg.Wait()
	r.check(ctx, start, killedAt, published, recoveries, func() counters { return storeCounters(t, db) })
}

func (r *killRun) countPublished() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.published)
}

// publish sends this publisher's half of the events in batches through
// its own process, retrying what was not answered success:true (a batch
// whose answer was lost may then be published twice: at least once).
func (r *killRun) publish(ctx context.Context, p int) {
	base := r.procs[p].base
	half := killEvents / 2
	for first := p * half; first < (p+1)*half && ctx.Err() == nil; first += killBatch {
		pending := map[int]bool{}
		for n := first; n < first+killBatch && n < (p+1)*half; n++ {
			pending[n] = true
		}
		for len(pending) > 0 && ctx.Err() == nil {
			var ns []int
			var events []map[string]any
			for n := range pending {
				ns = append(ns, n)
			}
			sort.Ints(ns)
			for _, n := range ns {
				events = append(events, map[string]any{
					"event_type": "kill.test", "message": map[string]any{"n": n},
					"occurred_at": "2026-01-02T03:04:05Z",
				})
			}
			var res struct {
				Results []struct {
					Success bool `json:"success"`
				} `json:"results"`
			}
			status, err := call(ctx, base, "POST", "/api/v1beta/events/batch", map[string]any{"events": events}, &res)
			if err == nil && status == http.StatusOK && len(res.Results) == len(ns) {
				r.mu.Lock()
				for i, n := range ns {
					if res.Results[i].Success {
						r.published[n] = true
						delete(pending, n)
					}
				}
				r.mu.Unlock()
			}
			if len(pending) > 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// worker pulls the durable consumer through one process (the other while
// its own does not answer) and acknowledges ok (80%), failed (10%), or not
// at all (10%: it takes a new worker id and lets the lease expire).
func (r *killRun) worker(ctx context.Context, i int) {
	target, gen := i%2, 0
	for !r.stop.Load() && ctx.Err() == nil {
		base := r.procs[target].base
		worker := fmt.Sprintf("w%d-%d", i, gen)
		var l pulled
		status, err := call(ctx, base, "POST", fmt.Sprintf("/v1/event-destinations/%s/pull?limit=10&visibility=%d&workerId=%s", r.consumer, killVisibility, worker), nil, &l)
		switch {
		case err != nil || status >= 500:
			target = 1 - target
			time.Sleep(50 * time.Millisecond)
			continue
		case status == http.StatusNoContent || status == http.StatusTooManyRequests:
			time.Sleep(20 * time.Millisecond)
			continue
		case status != http.StatusOK:
			r.violation("pull answered %d", status)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		r.mu.Lock()
		for _, e := range l.Events {
			if n, seen := r.delivered[e.Sequence]; seen && n != e.Data.N {
				r.monitorErrs = append(r.monitorErrs, fmt.Sprintf("position %s carried %d and %d", e.Sequence, n, e.Data.N))
			}
			r.delivered[e.Sequence] = e.Data.N
		}
		r.mu.Unlock()
		roll := randN(10)
		if roll == 0 {
			gen++ // abandon the lease
			continue
		}
		ackStatus := "ok"
		if roll == 1 {
			ackStatus = "failed"
		}
		var res struct {
			Status string `json:"status"`
		}
		status, err = call(ctx, base, "POST", "/v1/event-destinations/"+r.consumer+"/acknowledge",
			map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "status": ackStatus}, &res)
		if err != nil || status != http.StatusOK {
			// The outcome is unknown; the cursor tells at the end.
			target = 1 - target
			continue
		}
		r.mu.Lock()
		r.acks[res.Status]++
		if res.Status == "committed" {
			r.lastCommit = time.Now()
			r.committedN += len(l.Events)
			if r.ninetyAt.IsZero() && r.committedN >= killEvents*9/10 {
				r.ninetyAt = r.lastCommit
			}
			r.commits[fmt.Sprintf("%s/%d", l.LeaseID, l.Generation)]++
			for _, e := range l.Events {
				r.posCommits[e.Sequence]++
			}
		}
		r.mu.Unlock()
	}
}

// stream reads the durable queue over SSE through one process, reconnecting
// (to the other process while its own does not answer) whenever the
// stream ends.
func (r *killRun) stream(ctx context.Context, i int) {
	target := i % 2
	for !r.stop.Load() && ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !r.stop.Load() && sctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
		}()
		ok := r.readStream(sctx, r.procs[target].base)
		cancel()
		<-done
		if !ok {
			target = 1 - target
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// readStream reads one SSE connection until it ends; false if it could not
// be opened.
func (r *killRun) readStream(ctx context.Context, base string) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/v1beta/events/stream-durable?queue_id="+r.queue, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+killToken)
	res, err := http.DefaultClient.Do(req) // a stream: bounded by ctx, not a timeout
	if err != nil {
		return false
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "event":
			var e struct {
				Message struct {
					N int `json:"n"`
				} `json:"message"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err == nil {
				r.mu.Lock()
				if r.streamed[e.Message.N] == 0 {
					r.lastStream = time.Now()
				}
				r.streamed[e.Message.N]++
				r.mu.Unlock()
			}
		}
	}
	return true
}

// monitor reads both destinations on both processes, one read after
// another, and records a committed cursor that moved backward or an
// in-flight window past 1,000.
func (r *killRun) monitor(ctx context.Context) {
	for !r.stop.Load() && ctx.Err() == nil {
		for _, p := range r.procs {
			for _, id := range []string{r.consumer, r.queue} {
				var d destination
				status, err := call(ctx, p.base, "GET", "/v1/event-destinations/"+id, nil, &d)
				if err != nil || status != http.StatusOK {
					continue
				}
				r.mu.Lock()
				r.maxInFlight[id] = max(r.maxInFlight[id], d.InFlight)
				if d.InFlight > 1000 {
					r.monitorErrs = append(r.monitorErrs, fmt.Sprintf("%s: in_flight %d", id, d.InFlight))
				}
				if d.Committed != nil {
					if last := r.lastCursor[id]; *d.Committed < last {
						r.monitorErrs = append(r.monitorErrs, fmt.Sprintf("%s: committed moved back from %s to %s", id, last, *d.Committed))
					}
					r.lastCursor[id] = *d.Committed
				}
				r.mu.Unlock()
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *killRun) violation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.monitorErrs = append(r.monitorErrs, fmt.Sprintf(format, args...))
}

// settled reports whether publishing is done, every published event was
// delivered on both destinations (or dead-lettered), and neither holds
// anything in flight or requeued.
func (r *killRun) settled(ctx context.Context) bool {
	if !r.publishDone.Load() {
		return false
	}
	dead := r.deadLetters(ctx)
	r.mu.Lock()
	seen := map[int]bool{}
	for _, n := range r.delivered {
		seen[n] = true
	}
	for n := range r.published {
		if (!seen[n] && !dead[r.consumer][n]) || (r.streamed[n] == 0 && !dead[r.queue][n]) {
			r.mu.Unlock()
			return false
		}
	}
	r.mu.Unlock()
	for _, id := range []string{r.consumer, r.queue} {
		var d destination
		status, err := call(ctx, r.procs[0].base, "GET", "/v1/event-destinations/"+id, nil, &d)
		if err != nil || status != http.StatusOK || d.InFlight != 0 || d.Requeued != 0 {
			return false
		}
	}
	return true
}

// deadLetters returns the event numbers in the dead-letter queue by the
// destination they came from.
func (r *killRun) deadLetters(ctx context.Context) map[string]map[int]bool {
	out := map[string]map[int]bool{r.consumer: {}, r.queue: {}}
	token := ""
	for {
		var page struct {
			DeadLetters []struct {
				Origin string `json:"origin_queue"`
				Event  struct {
					Message struct {
						N int `json:"n"`
					} `json:"message"`
				} `json:"event"`
			} `json:"dead_letters"`
			Next string `json:"next_page_token"`
		}
		path := "/api/v1beta/dead-letters?limit=100"
		if token != "" {
			path += "&page_token=" + url.QueryEscape(token)
		}
		status, err := call(ctx, r.procs[0].base, "GET", path, nil, &page)
		if err != nil || status != http.StatusOK {
			return out
		}
		for _, d := range page.DeadLetters {
			if out[d.Origin] != nil {
				out[d.Origin][d.Event.Message.N] = true
			}
		}
		if page.Next == "" {
			return out
		}
		token = page.Next
	}
}

// check asserts the run's promises and logs its figures; counters reads
// the store's counters once Herald is stopped.
func (r *killRun) check(ctx context.Context, start, killedAt time.Time, published time.Duration, recoveries []time.Duration, counters func() counters) {
	t := r.t
	dead := r.deadLetters(ctx)
	var cons destination
	status, err := call(ctx, r.procs[0].base, "GET", "/v1/event-destinations/"+r.consumer, nil, &cons)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	// Tidy the broker side (deleting the destinations deletes their
	// subscriptions), then stop Herald so that PostgreSQL's statistics of
	// its connections are final.
	_, _ = call(ctx, r.procs[0].base, "DELETE", "/v1/event-destinations/"+r.consumer, nil, nil)
	_, _ = call(ctx, r.procs[0].base, "DELETE", "/api/v1beta/queues/durable?queue_id="+r.queue, nil, nil)
	for _, p := range r.procs {
		p.kill()
	}
	after := counters()

	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.monitorErrs, "cursor, window and position violations")
	require.Len(t, r.published, killEvents, "every event was published within the run")

	// Committed: the cursor passed a position that carried the event.
	require.NotNil(t, cons.Committed, "the consumer committed something")
	require.Zero(t, cons.InFlight)
	committedN := map[int]bool{}
	for pos, n := range r.delivered {
		if pos <= *cons.Committed {
			committedN[n] = true
		}
	}
	var lostConsumer, lostQueue []int
	for n := range r.published {
		if !committedN[n] && !dead[r.consumer][n] {
			lostConsumer = append(lostConsumer, n)
		}
		if r.streamed[n] == 0 && !dead[r.queue][n] {
			lostQueue = append(lostQueue, n)
		}
	}
	sort.Ints(lostConsumer)
	sort.Ints(lostQueue)
	require.Empty(t, lostConsumer, "published, neither committed on the consumer nor dead-lettered")
	require.Empty(t, lostQueue, "published, neither streamed from the queue nor dead-lettered")
	for lg, c := range r.commits {
		require.Equal(t, 1, c, "lease generation %s committed %d times", lg, c)
	}
	for pos, c := range r.posCommits {
		require.Equal(t, 1, c, "position %s committed %d times", pos, c)
	}

	// Figures.
	deadCount := len(dead[r.consumer]) + len(dead[r.queue])
	dupConsumer := len(r.delivered) - len(committedN)
	dupQueue := 0
	for _, c := range r.streamed {
		dupQueue += c - 1
	}
	delivered := len(r.delivered)
	for _, c := range r.streamed {
		delivered += c
	}
	// The database is the run's own: its counters start at zero (the
	// table's creation and the two destinations' are included).
	stmts, rows, bytes := after.statements, after.rows, after.bytes
	consumerDone, queueDone := r.lastCommit.Sub(start), r.lastStream.Sub(start)
	t.Logf("%d events published in %v (%.0f/s) through both processes", killEvents, published.Round(time.Millisecond),
		float64(killEvents)/published.Seconds())
	t.Logf("consumer: 90%% of the events committed %v after the start (%.0f events/s)", r.ninetyAt.Sub(start).Round(time.Millisecond),
		float64(killEvents*9/10)/r.ninetyAt.Sub(start).Seconds())
	t.Logf("consumer: every event committed %v after the start (%.0f events/s end to end); queue: every event streamed %v after the start, %v after the last kill",
		consumerDone.Round(time.Millisecond), float64(killEvents)/consumerDone.Seconds(),
		queueDone.Round(time.Millisecond), r.lastStream.Sub(killedAt).Round(time.Millisecond))
	t.Logf("consumer: %d positions delivered for %d events (%d duplicates), acks %v, dead letters %d, max in_flight %d",
		len(r.delivered), len(committedN), dupConsumer, r.acks, deadCount, r.maxInFlight[r.consumer])
	t.Logf("queue: %d stream deliveries for %d events (%d duplicates), max in_flight %d",
		delivered-len(r.delivered), len(r.streamed), dupQueue, r.maxInFlight[r.queue])
	t.Logf("%d kills; kill -9 to answering /health again: %v", len(recoveries), recoveries)
	t.Logf("store: %d transactions (every statement outside one counts; the monitor's reads included), %d rows written, about %d bytes of rows written; per delivered event: %.1f transactions, %.1f row writes, about %.0f bytes",
		stmts, rows, bytes, float64(stmts)/float64(delivered), float64(rows)/float64(delivered), float64(bytes)/float64(delivered))
}

// counters are the store database's cumulative transactions, the rows
// written to the lease store's table (inserted, updated, deleted) and an
// estimate of the bytes those rows held.
type counters struct{ statements, rows, bytes int64 }

// storeCounters reads counters of the run's database from PostgreSQL's
// statistics: xact_commit + xact_rollback counts transactions (each
// statement outside a transaction is one); rows are the table's inserted,
// updated and deleted tuples; bytes estimates what the inserts and updates
// wrote as their count times the average stored row (pg_column_size,
// compressed and TOASTed as stored) of what the table then holds.
func storeCounters(t *testing.T, dbURL string) counters {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	// A backend flushes its statistics when it exits: wait until Herald's
	// connections are gone.
	for {
		var others int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others)
		require.NoError(t, err)
		if others == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Herald's connections to the store did not close: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	_, err = conn.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	require.NoError(t, err)
	var c counters
	err = conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.statements)
	require.NoError(t, err)
	var written int64
	err = conn.QueryRow(ctx, `SELECT COALESCE(sum(n_tup_ins + n_tup_upd), 0)::bigint, COALESCE(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint
		FROM pg_stat_user_tables WHERE relname = 'herald'`).Scan(&written, &c.rows)
	require.NoError(t, err)
	var avg float64
	err = conn.QueryRow(ctx, `SELECT COALESCE(avg(pg_column_size(h.*)), 0)::float8 FROM herald h`).Scan(&avg)
	c.bytes = int64(float64(written) * avg)
	require.NoError(t, err)
	return c
}
