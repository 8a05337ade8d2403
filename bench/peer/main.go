// Command peer runs Herald and NATS JetStream side by side, each as its
// own server process on loopback, through the same workload, and prints
// what each costs: events/s, server CPU µs per event (from the server
// process's /proc accounting, so the client's own work is not counted),
// p50/p99 pull and ack latency, and the Herald/JetStream ratios.
//
// The workload (docs/benchmarks.md, "Peer benchmark"): realistic ~1 KiB
// JSON events, varied (ids, names, numbers, nested arrays differ from
// event to event), published in batches of 100 by two publishers while
// 1 or 4 workers pull up to 100 at a time and acknowledge each pull.
// JetStream has a memory stream and a durable pull consumer with explicit
// acks; Herald runs the local adapter on its in-memory defaults and is
// driven over REST (the notifications API's batch publish, the
// durable-consumer API's pull and acknowledge), and once more with the
// batch published over gRPC (BatchPublishEvents) instead ("herald-grpc").
// Runs alternate between the servers so that a change in the shared
// machine's load hits each.
//
// Besides the server's CPU, each line gives the load generator's own CPU
// per event (client cpu-µs/event: both share the machine, so a heavier
// client slows its server's run) and, for Herald, the server's heap
// allocations per event (runtime memstats, read from HERALD_PPROF_ADDR's
// /debug/vars before and after the run).
//
// Usage (make bench-peer builds both servers first):
//
//	peer -herald BIN -nats-server BIN [-events 20000] [-rounds 3] [-servers jetstream,herald,herald-grpc]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/go-json-experiment/json/jsontext"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/heraldevents/herald/bench/internal/stack"
	publisherv1beta "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta/publisherv1betaconnect"
)

const (
	publishBatch = 100 // events per publish
	pullLimit    = 100 // most events per pull
	publishers   = 2
	eventBytes   = 1024 // about this many bytes of JSON per event message
	distinct     = 1000 // distinct event messages, cycled
	token        = "peer-bench-token"
)

func main() {
	heraldBin := flag.String("herald", "", "the herald binary (built from ./cmd/herald)")
	natsBin := flag.String("nats-server", "", "the nats-server binary (built from github.com/nats-io/nats-server/v2)")
	events := flag.Int("events", 20_000, "events published and consumed per run")
	rounds := flag.Int("rounds", 3, "runs of each server per worker count, alternating")
	servers := flag.String("servers", "jetstream,herald,herald-grpc", "the servers to run, comma-separated: jetstream, herald (REST publish), herald-grpc (gRPC publish)")
	workerCounts := flag.String("workers", "1,4", "the worker counts to run, comma-separated")
	flag.BoolVar(&jetstreamFile, "jetstream-file", false, "give raw JetStream a file stream (as Herald's NATS driver makes) instead of a memory stream")
	stacks := flag.String("stacks", "mem", "the broker and store stacks Herald runs on, comma-separated: "+strings.Join(stack.Names, ", ")+" (see bench/internal/stack)")
	procs := flag.Int("herald-procs", 1, "Herald processes sharing one broker and store; publishers and workers are spread over them")
	flag.DurationVar(&receiveWait, "wait", 0, "server-side wait of a pull that finds nothing: HERALD_RECEIVE_WAIT for Herald, Fetch's MaxWait for JetStream (0: no wait, the client sleeps 200 µs)")
	cpuProfile := flag.String("cpuprofile", "", "write the load generator's own CPU profile to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *heraldBin == "" || *natsBin == "" {
		log.Fatal("peer: -herald and -nats-server are required (make bench-peer sets them)")
	}
	msgs := makeMessages(distinct)
	fmt.Printf("workload: %d events per run, ~%d B varied JSON each, publish batches of %d by %d publishers, pull up to %d, ack each pull\n",
		*events, avgLen(msgs), publishBatch, publishers, pullLimit)
	fmt.Printf("%-20s %-7s %-3s %10s %13s %13s %13s %8s %9s %9s %9s %9s\n", "server", "workers", "run", "events/s", "cpu-µs/event", "client-µs/ev", "allocs/event", "ev/pull", "pull p50", "pull p99", "ack p50", "ack p99")
	type key struct {
		server  string
		workers int
	}
	var runs []string // server/stack names in the order they run
	for _, sv := range strings.Split(*servers, ",") {
		if sv == "jetstream" {
			runs = append(runs, sv)
			continue
		}
		for _, stk := range strings.Split(*stacks, ",") {
			runs = append(runs, sv+"/"+stk)
		}
	}
	all := map[key][]result{}
	var counts []int
	for _, w := range strings.Split(*workerCounts, ",") {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			log.Fatalf("peer: -workers: %q is not a worker count", w)
		}
		counts = append(counts, n)
	}
	for _, workers := range counts {
		for r := range *rounds {
			for _, s := range runs {
				var res result
				var err error
				sv, stk, _ := strings.Cut(s, "/")
				switch sv {
				case "jetstream":
					res, err = runNATS(*natsBin, msgs, *events, workers)
				case "herald", "herald-grpc":
					res, err = runHerald(*heraldBin, *natsBin, stk, *procs, msgs, *events, workers, sv == "herald-grpc")
				default:
					log.Fatalf("peer: unknown server %q in -servers", s)
				}
				if err != nil {
					log.Fatalf("%s, %d workers: %v", s, workers, err)
				}
				res.print(s, workers, r+1)
				all[key{s, workers}] = append(all[key{s, workers}], res)
			}
		}
	}
	fmt.Println()
	fmt.Println("medians and Herald/JetStream ratios (throughput: ≥ 1 is as fast; CPU: ≤ 1 is as cheap)")
	for _, workers := range counts {
		j, ok := all[key{"jetstream", workers}]
		if !ok {
			continue
		}
		jm := median(j)
		fmt.Printf("%d worker(s): JetStream %.0f events/s, %.1f cpu-µs/event\n", workers, jm.rate, jm.cpuPerEvent)
		for _, s := range runs {
			h, ok := all[key{s, workers}]
			if !ok || s == "jetstream" {
				continue
			}
			hm := median(h)
			fmt.Printf("  %-20s %.0f events/s, %.1f cpu-µs/event (all processes %.1f), %.1f allocs/event; throughput ratio %.2f, CPU ratio %.2f (all processes %.2f)\n",
				s, hm.rate, hm.cpuPerEvent, hm.totalPerEvent, hm.allocsPerEvent, hm.rate/jm.rate, hm.cpuPerEvent/jm.cpuPerEvent, hm.totalPerEvent/jm.cpuPerEvent)
		}
	}
}

// result is one run's figures.
type result struct {
	rate float64
	// cpuPerEvent is the Herald processes' (or nats-server's) CPU µs per
	// event; totalPerEvent adds every other process of the stack.
	cpuPerEvent, totalPerEvent float64
	others                     []namedFigure // CPU µs per event of each other process group
	counters                   []namedFigure // the store's own operations per event
	clientPerEvent             float64       // the load generator's CPU µs per event
	allocsPerEvent             float64       // the server's heap allocations per event; NaN when unknown
	perPull                    float64       // events per pull that returned any
	pull50, pull99             time.Duration
	ack50, ack99               time.Duration
}

// namedFigure is one figure of a run with its name.
type namedFigure struct {
	name  string
	value float64
}

func (r result) print(server string, workers, run int) {
	allocs := "n/a"
	if !math.IsNaN(r.allocsPerEvent) {
		allocs = strconv.FormatFloat(r.allocsPerEvent, 'f', 1, 64)
	}
	fmt.Printf("%-20s %-7d %-3d %10.0f %13.1f %13.1f %13s %8.1f %9s %9s %9s %9s\n", server, workers, run, r.rate, r.cpuPerEvent, r.clientPerEvent, allocs, r.perPull,
		r.pull50.Round(time.Microsecond), r.pull99.Round(time.Microsecond), r.ack50.Round(time.Microsecond), r.ack99.Round(time.Microsecond))
	if len(r.others) == 0 && len(r.counters) == 0 {
		return
	}
	line := fmt.Sprintf("%-20s cpu-µs/event: server %.1f", "", r.cpuPerEvent)
	for _, o := range r.others {
		line += fmt.Sprintf(", %s %.1f", o.name, o.value)
	}
	line += fmt.Sprintf(", all %.1f", r.totalPerEvent)
	if len(r.counters) > 0 {
		line += "; store per event:"
		for _, c := range r.counters {
			line += fmt.Sprintf(" %s %.3f", c.name, c.value)
		}
	}
	fmt.Println(line)
}

func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{
		rate:           pick(func(r result) float64 { return r.rate }),
		cpuPerEvent:    pick(func(r result) float64 { return r.cpuPerEvent }),
		totalPerEvent:  pick(func(r result) float64 { return r.totalPerEvent }),
		allocsPerEvent: pick(func(r result) float64 { return r.allocsPerEvent }),
	}
}

// makeMessages builds n JSON objects of about eventBytes each whose
// contents vary as real events' do.
func makeMessages(n int) [][]byte {
	rng := rand.New(rand.NewPCG(13, 17))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"}
	word := func() string { return words[rng.IntN(len(words))] }
	out := make([][]byte, n)
	for i := range out {
		items := []map[string]any{}
		m := map[string]any{
			"order_id":   fmt.Sprintf("ord-%08d-%04x", i, rng.IntN(1<<16)),
			"customer":   map[string]any{"id": rng.IntN(1_000_000), "name": word() + " " + word(), "email": word() + "@" + word() + ".example", "vip": rng.IntN(4) == 0},
			"created_at": time.Unix(1_700_000_000+int64(rng.IntN(10_000_000)), 0).UTC().Format(time.RFC3339),
			"currency":   []string{"EUR", "USD", "GBP", "SEK"}[rng.IntN(4)],
			"tags":       []string{word(), word(), word()},
			"note":       strings.Repeat(word()+" ", 1+rng.IntN(6)),
			"items":      &items,
		}
		for {
			items = append(items, map[string]any{"sku": fmt.Sprintf("SKU-%06d", rng.IntN(1_000_000)), "qty": 1 + rng.IntN(9), "price": float64(rng.IntN(100_000)) / 100, "title": word() + " " + word() + " " + word()})
			b, _ := json.Marshal(m)
			if len(b) >= eventBytes-40 {
				out[i] = b
				break
			}
		}
	}
	return out
}

func avgLen(msgs [][]byte) int {
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	return n / len(msgs)
}

// stallAfter is how long the consumers may go without progress once
// every batch is published before a run fails: an event lost on the way
// would otherwise leave the workers polling forever.
const stallAfter = 30 * time.Second

// receiveWait is the -wait flag, jetstreamFile the -jetstream-file flag.
var (
	receiveWait   time.Duration
	jetstreamFile bool
)

// meter says what a run's figures are read from.
type meter struct {
	servers []int             // the server processes (Herald's, or nats-server)
	others  []stack.ProcGroup // the other processes doing the work
	// mallocs, when not nil, reads the servers' heap allocation count.
	mallocs func() (uint64, error)
	// counters, when not nil, reads the store's operation counts.
	counters func() (map[string]int64, error)
}

func (m meter) serverCPU() (time.Duration, error) {
	var total time.Duration
	for _, pid := range m.servers {
		c, err := stack.CPUOf(pid)
		if err != nil {
			return 0, err
		}
		total += c
	}
	return total, nil
}

func (m meter) otherCPU() ([]time.Duration, error) {
	out := make([]time.Duration, len(m.others))
	for i, g := range m.others {
		c, err := g.CPU()
		if err != nil {
			return nil, fmt.Errorf("%s CPU: %w", g.Name, err)
		}
		out[i] = c
	}
	return out, nil
}

// measure runs publish and consume concurrently and computes the figures.
func measure(m meter, events int, publish func(batch [][]byte) error, consume func(worker int, done *atomic.Int64, lat *latencies) error, msgs [][]byte, workers int) (result, error) {
	mallocs := m.mallocs
	batches := make(chan [][]byte, events/publishBatch+1)
	for i := 0; i < events; i += publishBatch {
		b := make([][]byte, 0, publishBatch)
		for j := i; j < min(i+publishBatch, events); j++ {
			b = append(b, msgs[j%len(msgs)])
		}
		batches <- b
	}
	close(batches)
	cpu0, err := m.serverCPU()
	if err != nil {
		return result{}, err
	}
	others0, err := m.otherCPU()
	if err != nil {
		return result{}, err
	}
	var counts0 map[string]int64
	if m.counters != nil {
		if counts0, err = m.counters(); err != nil {
			return result{}, err
		}
	}
	self0, err := stack.CPUOf(os.Getpid())
	if err != nil {
		return result{}, err
	}
	var m0 uint64
	if mallocs != nil {
		if m0, err = mallocs(); err != nil {
			return result{}, err
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		done atomic.Int64
		lat  latencies
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		done.Store(1 << 62) // stops the workers
	}
	t0 := time.Now()
	var published sync.WaitGroup
	for range publishers {
		published.Add(1)
		wg.Go(func() {
			defer published.Done()
			for b := range batches {
				if err := publish(b); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() {
		published.Wait()
		last, at := done.Load(), time.Now()
		for {
			select {
			case <-finished:
				return
			case <-time.After(time.Second):
			}
			if n := done.Load(); n != last {
				last, at = n, time.Now()
			} else if time.Since(at) > stallAfter {
				fail(fmt.Errorf("consumed %d of %d events and none for %s since", n, events, stallAfter))
				return
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			if err := consume(w, &done, &lat); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	close(finished)
	elapsed := time.Since(t0)
	cpu1, err := m.serverCPU()
	if err != nil {
		return result{}, err
	}
	others1, err := m.otherCPU()
	if err != nil {
		return result{}, err
	}
	perEvent := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(events) }
	var others []namedFigure
	total := perEvent(cpu1 - cpu0)
	for i, g := range m.others {
		v := perEvent(others1[i] - others0[i])
		others = append(others, namedFigure{g.Name, v})
		total += v
	}
	var counters []namedFigure
	if m.counters != nil {
		// PostgreSQL publishes a backend's statistics when its
		// transaction ends, at most once a second (PGSTAT_MIN_INTERVAL).
		time.Sleep(1500 * time.Millisecond)
		counts1, err := m.counters()
		if err != nil {
			return result{}, err
		}
		for _, k := range slices.Sorted(maps.Keys(counts1)) {
			counters = append(counters, namedFigure{k, float64(counts1[k]-counts0[k]) / float64(events)})
		}
	}
	self1, err := stack.CPUOf(os.Getpid())
	if err != nil {
		return result{}, err
	}
	allocs := math.NaN()
	if mallocs != nil {
		m1, err := mallocs()
		if err != nil {
			return result{}, err
		}
		allocs = float64(m1-m0) / float64(events)
	}
	if len(errs) > 0 {
		return result{}, errs[0]
	}
	if got := done.Load(); got != int64(events) {
		return result{}, fmt.Errorf("consumed %d events, published %d", got, events)
	}
	p := func(ds []time.Duration, q float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(q*float64(len(ds))))]
	}
	return result{
		rate:           float64(events) / elapsed.Seconds(),
		cpuPerEvent:    perEvent(cpu1 - cpu0),
		totalPerEvent:  total,
		others:         others,
		counters:       counters,
		clientPerEvent: float64((self1 - self0).Microseconds()) / float64(events),
		allocsPerEvent: allocs,
		perPull:        float64(events) / float64(max(1, len(lat.pull))),
		pull50:         p(lat.pull, 0.50), pull99: p(lat.pull, 0.99),
		ack50: p(lat.ack, 0.50), ack99: p(lat.ack, 0.99),
	}, nil
}

// latencies collects request durations from the workers.
type latencies struct {
	mu        sync.Mutex
	pull, ack []time.Duration
}

func (l *latencies) add(pull, ack time.Duration) {
	l.mu.Lock()
	l.pull = append(l.pull, pull)
	l.ack = append(l.ack, ack)
	l.mu.Unlock()
}

// runNATS is one JetStream run: a fresh nats-server with memory storage.
func runNATS(bin string, msgs [][]byte, events, workers int) (result, error) {
	addr, err := stack.FreeAddr()
	if err != nil {
		return result{}, err
	}
	host, port, _ := net.SplitHostPort(addr)
	srv, err := stack.Start(bin, []string{"-js", "-a", host, "-p", port, "-sd", ".", "-m", "0"}, nil, io.Discard)
	if err != nil {
		return result{}, err
	}
	defer srv.Stop()
	var nc *natsgo.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if nc, err = natsgo.Connect("nats://" + addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("nats-server did not start: %w", err)
		}
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	storage := jetstream.MemoryStorage
	if jetstreamFile {
		storage = jetstream.FileStorage
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}, Storage: storage}); err != nil {
		return result{}, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "peer", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: -1})
	if err != nil {
		return result{}, err
	}
	publish := func(batch [][]byte) error {
		for i, m := range batch {
			if _, err := js.PublishAsync("bench.orders."+strconv.Itoa(i%10), m); err != nil {
				return err
			}
		}
		select {
		case <-js.PublishAsyncComplete():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	consume := func(_ int, done *atomic.Int64, lat *latencies) error {
		for done.Load() < int64(events) {
			t0 := time.Now()
			// As Herald's pull: what is there now, or with -wait what
			// arrives within it.
			var b jetstream.MessageBatch
			var err error
			if receiveWait > 0 {
				b, err = cons.Fetch(pullLimit, jetstream.FetchMaxWait(receiveWait))
			} else {
				b, err = cons.FetchNoWait(pullLimit)
			}
			if err != nil {
				return err
			}
			var got []jetstream.Msg
			for m := range b.Messages() {
				got = append(got, m)
			}
			if err := b.Error(); err != nil {
				return err
			}
			if len(got) == 0 {
				if receiveWait == 0 {
					time.Sleep(200 * time.Microsecond) // caught up with the publishers
				}
				continue
			}
			pull := time.Since(t0)
			t0 = time.Now()
			for _, m := range got[:len(got)-1] {
				if err := m.Ack(); err != nil {
					return err
				}
			}
			// The last ack waits for the server's reply: a worker knows
			// its pull is settled, as a Herald acknowledgement says so.
			if err := got[len(got)-1].DoubleAck(ctx); err != nil {
				return err
			}
			lat.add(pull, time.Since(t0))
			done.Add(int64(len(got)))
		}
		return nil
	}
	return measure(meter{servers: []int{srv.Cmd.Process.Pid}}, events, publish, consume, msgs, workers)
}

// runHerald is one Herald run: procs fresh `herald serve` processes on
// stack (sharing its broker and store), its batches published over REST,
// or over gRPC when grpc is set; pulls and acknowledgements always over
// REST. Publisher i and worker w use process i and w modulo procs.
func runHerald(bin, natsBin, stackName string, procs int, msgs [][]byte, events, workers int, grpc bool) (result, error) {
	stk, err := stack.Open(stackName, natsBin)
	if err != nil {
		return result{}, err
	}
	defer stk.Close()
	var (
		bases  []string
		pids   []int
		debugs []string
	)
	for i := range procs {
		addr, err := stack.FreeAddr()
		if err != nil {
			return result{}, err
		}
		// HERALD_PPROF_ADDR from the environment wins for the first
		// process, so that it can be profiled during a run; every
		// process's /debug/vars gives its allocations.
		debugAddr := os.Getenv("HERALD_PPROF_ADDR")
		if debugAddr == "" || i > 0 {
			if debugAddr, err = stack.FreeAddr(); err != nil {
				return result{}, err
			}
		}
		env := append([]string{"HERALD_ADDR=" + addr, "HERALD_DEV_TOKEN=" + token, "HERALD_LOG_LEVEL=warn", "HERALD_PPROF_ADDR=" + debugAddr,
			"HERALD_RECEIVE_WAIT=" + receiveWait.String()}, stk.Env...)
		srv, err := stack.Start(bin, []string{"serve"}, env, os.Stderr)
		if err != nil {
			return result{}, err
		}
		defer srv.Stop()
		bases = append(bases, "http://"+addr)
		pids = append(pids, srv.Cmd.Process.Pid)
		debugs = append(debugs, debugAddr)
	}
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	do := func(proc int, method, path string, body []byte) ([]byte, int, error) {
		req, err := http.NewRequest(method, bases[proc%len(bases)]+path, bytes.NewReader(body))
		if err != nil {
			return nil, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			return nil, 0, err
		}
		defer res.Body.Close()
		if res.ContentLength > 0 {
			b := make([]byte, res.ContentLength)
			_, err := io.ReadFull(res.Body, b)
			return b, res.StatusCode, err
		}
		b, err := io.ReadAll(res.Body)
		return b, res.StatusCode, err
	}
	var body []byte
	var status int
	for p := range procs {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, status, err = do(p, "GET", "/health", nil); err == nil && status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				return result{}, fmt.Errorf("herald did not start: %v (status %d)", err, status)
			}
		}
	}
	if body, status, err = do(0, "POST", "/v1/event-destinations", []byte(`{"type":"DURABLE_CONSUMER"}`)); err != nil {
		return result{}, err
	}
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &d); err != nil || status != http.StatusCreated || d.ID == "" {
		return result{}, fmt.Errorf("create destination: status %d: %.200s", status, body)
	}
	// Deleting the destination deletes its broker subscription.
	defer func() { _, _, _ = do(0, "DELETE", "/v1/event-destinations/"+d.ID, nil) }()
	var published atomic.Int64 // batches, to spread publishers over the processes
	var pubs []publisherv1betaconnect.EventPublishingServiceClient
	var structs map[*byte]*structpb.Struct
	if grpc {
		h2c := &http.Transport{Protocols: new(http.Protocols)}
		h2c.Protocols.SetUnencryptedHTTP2(true)
		defer h2c.CloseIdleConnections()
		for _, base := range bases {
			pubs = append(pubs, publisherv1betaconnect.NewEventPublishingServiceClient(&http.Client{Transport: h2c, Timeout: time.Minute}, base, connect.WithGRPC(),
				// Like grpc-go's and the Python client's defaults, the
				// publisher does not offer to take gzip, so the echo
				// comes back as it is.
				connect.WithAcceptCompression("gzip", nil, nil),
				connect.WithInterceptors(bearer(token))))
		}
		// A gRPC publisher holds its messages as Structs already: build
		// each once, as the REST publisher's JSON is built once.
		if structs, err = toStructs(msgs); err != nil {
			return result{}, err
		}
	}
	publish := func(batch [][]byte) error {
		proc := int(published.Add(1)) % procs
		if grpc {
			return publishGRPC(pubs[proc], structs, batch)
		}
		// Built as a publisher that cares builds it: appended into one
		// buffer of about the right size.
		n := 16
		for _, m := range batch {
			n += len(m) + 96
		}
		buf := make([]byte, 0, n)
		buf = append(buf, `{"events":[`...)
		for i, m := range batch {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `{"event_type":"bench.orders.`...)
			buf = strconv.AppendInt(buf, int64(i%10), 10)
			buf = append(buf, `","resource":{"resource_id":"/orders/`...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, `"},"message":`...)
			buf = append(buf, m...)
			buf = append(buf, '}')
		}
		buf = append(buf, `]}`...)
		res, status, err := do(proc, "POST", "/api/v1beta/events/batch", buf)
		if err != nil {
			return err
		}
		if status != http.StatusOK || bytes.Contains(res, []byte(`"success":false`)) {
			return fmt.Errorf("publish: status %d: %.300s", status, res)
		}
		return nil
	}
	mallocs := func() (uint64, error) {
		var total uint64
		for _, a := range debugs {
			n, err := heapMallocs("http://" + a + "/debug/vars")
			if err != nil {
				return 0, err
			}
			total += n
		}
		return total, nil
	}
	pullPath := "/v1/event-destinations/" + d.ID + "/pull?limit=" + strconv.Itoa(pullLimit)
	ackPath := "/v1/event-destinations/" + d.ID + "/acknowledge"
	consume := func(w int, done *atomic.Int64, lat *latencies) error {
		path := pullPath + "&workerId=peer-" + strconv.Itoa(w)
		for done.Load() < int64(events) {
			t0 := time.Now()
			res, status, err := do(w, "POST", path, nil)
			if err != nil {
				return err
			}
			if status == http.StatusNoContent {
				if receiveWait == 0 {
					time.Sleep(200 * time.Microsecond) // caught up with the publishers
				}
				continue
			}
			if status != http.StatusOK {
				return fmt.Errorf("pull: status %d: %.200s", status, res)
			}
			pull := time.Since(t0)
			l, err := readLease(res)
			if err != nil {
				return fmt.Errorf("pull body: %w", err)
			}
			t0 = time.Now()
			ack := fmt.Appendf(nil, `{"leaseId":%q,"generation":%d,"status":"ok"}`, l.leaseID, l.generation)
			res, status, err = do(w, "POST", ackPath, ack)
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				return fmt.Errorf("ack: status %d: %.200s", status, res)
			}
			lat.add(pull, time.Since(t0))
			done.Add(int64(l.events))
		}
		return nil
	}
	return measure(meter{servers: pids, others: stk.Others, mallocs: mallocs, counters: stk.Counters}, events, publish, consume, msgs, workers)
}

// lease is what a worker needs of a pull's answer to acknowledge it.
type lease struct {
	leaseID    string
	generation int64
	events     int
}

// readLease reads a pull's answer as a worker's protocol layer does: the
// lease's id and generation, and its events split into their JSON values
// (each checked as JSON, none decoded further), the way a JetStream
// client splits a fetch into messages without decoding their payloads.
func readLease(body []byte) (lease, error) {
	var l lease
	// Names are not checked for repeats, as encoding/json does not.
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return l, fmt.Errorf("not a JSON object: %v", err)
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return l, err
		}
		switch name.String() {
		case "leaseId":
			tok, err := dec.ReadToken()
			if err != nil {
				return l, err
			}
			l.leaseID = tok.String()
		case "generation":
			tok, err := dec.ReadToken()
			if err != nil {
				return l, err
			}
			l.generation = tok.Int()
		case "events":
			if _, err := dec.ReadToken(); err != nil {
				return l, err
			}
			for dec.PeekKind() != ']' {
				if _, err := dec.ReadValue(); err != nil {
					return l, err
				}
				l.events++
			}
			if _, err := dec.ReadToken(); err != nil {
				return l, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return l, err
			}
		}
	}
	if l.leaseID == "" {
		return l, fmt.Errorf("no leaseId in %.200s", body)
	}
	return l, nil
}

// publishGRPC publishes batch with BatchPublishEvents.
func publishGRPC(pub publisherv1betaconnect.EventPublishingServiceClient, structs map[*byte]*structpb.Struct, batch [][]byte) error {
	req := &publisherv1beta.BatchPublishEventsRequest{Events: make([]*publisherv1beta.Event, len(batch))}
	for i, m := range batch {
		req.Events[i] = &publisherv1beta.Event{
			EventType: "bench.orders." + strconv.Itoa(i%10),
			Resource:  &publisherv1beta.EventResource{ResourceId: "/orders/" + strconv.Itoa(i)},
			Message:   structs[&m[0]],
		}
	}
	res, err := pub.BatchPublishEvents(context.Background(), connect.NewRequest(req))
	if err != nil {
		return fmt.Errorf("publish over gRPC: %w", err)
	}
	for _, r := range res.Msg.GetResults() {
		if !r.GetSuccess() {
			return fmt.Errorf("publish over gRPC: %s", r.GetFailureReason())
		}
	}
	return nil
}

// toStructs decodes each message into a Struct, keyed by its first byte.
func toStructs(msgs [][]byte) (map[*byte]*structpb.Struct, error) {
	out := make(map[*byte]*structpb.Struct, len(msgs))
	for _, m := range msgs {
		st := new(structpb.Struct)
		if err := protojson.Unmarshal(m, st); err != nil {
			return nil, err
		}
		out[&m[0]] = st
	}
	return out, nil
}

// bearer adds the token to every gRPC request.
func bearer(token string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}
}

// heapMallocs reads the runtime's cumulative heap allocation count
// (memstats.Mallocs) from an expvar /debug/vars page.
func heapMallocs(url string) (uint64, error) {
	res, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var v struct {
		Memstats struct {
			Mallocs uint64
		} `json:"memstats"`
	}
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	return v.Memstats.Mallocs, nil
}
