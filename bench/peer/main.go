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
// durable-consumer API's pull and acknowledge). Runs alternate between
// the two so that a change in the shared machine's load hits both.
//
// Usage (make bench-peer builds both servers first):
//
//	peer -herald BIN -nats-server BIN [-events 20000] [-rounds 3]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	publishBatch = 100 // events per publish
	pullLimit    = 100 // most events per pull
	publishers   = 2
	eventBytes   = 1024 // about this many bytes of JSON per event message
	distinct     = 1000 // distinct event messages, cycled
	token        = "peer-bench-token"
	clockTicks   = 100 // USER_HZ of /proc/PID/stat on Linux
)

func main() {
	heraldBin := flag.String("herald", "", "the herald binary (built from ./cmd/herald)")
	natsBin := flag.String("nats-server", "", "the nats-server binary (built from github.com/nats-io/nats-server/v2)")
	events := flag.Int("events", 20_000, "events published and consumed per run")
	rounds := flag.Int("rounds", 3, "runs of each server per worker count, alternating")
	flag.Parse()
	if *heraldBin == "" || *natsBin == "" {
		log.Fatal("peer: -herald and -nats-server are required (make bench-peer sets them)")
	}
	msgs := makeMessages(distinct)
	fmt.Printf("workload: %d events per run, ~%d B varied JSON each, publish batches of %d by %d publishers, pull up to %d, ack each pull\n",
		*events, avgLen(msgs), publishBatch, publishers, pullLimit)
	fmt.Printf("%-9s %-7s %-5s %12s %14s %10s %10s %10s %10s\n", "server", "workers", "run", "events/s", "cpu-µs/event", "pull p50", "pull p99", "ack p50", "ack p99")
	type key struct {
		server  string
		workers int
	}
	all := map[key][]result{}
	for _, workers := range []int{1, 4} {
		for r := range *rounds {
			for _, s := range []string{"jetstream", "herald"} {
				var res result
				var err error
				if s == "jetstream" {
					res, err = runNATS(*natsBin, msgs, *events, workers)
				} else {
					res, err = runHerald(*heraldBin, msgs, *events, workers)
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
	for _, workers := range []int{1, 4} {
		h, j := median(all[key{"herald", workers}]), median(all[key{"jetstream", workers}])
		fmt.Printf("%d worker(s): Herald %.0f events/s, %.1f cpu-µs/event; JetStream %.0f events/s, %.1f cpu-µs/event; throughput ratio %.2f, CPU ratio %.2f\n",
			workers, h.rate, h.cpuPerEvent, j.rate, j.cpuPerEvent, h.rate/j.rate, h.cpuPerEvent/j.cpuPerEvent)
	}
}

// result is one run's figures.
type result struct {
	rate, cpuPerEvent float64
	pull50, pull99    time.Duration
	ack50, ack99      time.Duration
}

func (r result) print(server string, workers, run int) {
	fmt.Printf("%-9s %-7d %-5d %12.0f %14.1f %10s %10s %10s %10s\n", server, workers, run, r.rate, r.cpuPerEvent,
		r.pull50.Round(time.Microsecond), r.pull99.Round(time.Microsecond), r.ack50.Round(time.Microsecond), r.ack99.Round(time.Microsecond))
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
	return result{rate: pick(func(r result) float64 { return r.rate }), cpuPerEvent: pick(func(r result) float64 { return r.cpuPerEvent })}
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

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// cpuOf is the CPU time (user + system, all threads) process pid has used.
func cpuOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields count from after it.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cannot read /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// server is a started server process.
type server struct {
	cmd *exec.Cmd
	dir string
}

func start(bin string, args, env []string, stderr io.Writer) (*server, error) {
	dir, err := os.MkdirTemp("", "herald-peer-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &server{cmd: cmd, dir: dir}, nil
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(s.dir)
}

// measure runs publish and consume concurrently and computes the figures.
func measure(pid, events int, publish func(batch [][]byte) error, consume func(worker int, done *atomic.Int64, lat *latencies) error, msgs [][]byte, workers int) (result, error) {
	batches := make(chan [][]byte, events/publishBatch+1)
	for i := 0; i < events; i += publishBatch {
		b := make([][]byte, 0, publishBatch)
		for j := i; j < min(i+publishBatch, events); j++ {
			b = append(b, msgs[j%len(msgs)])
		}
		batches <- b
	}
	close(batches)
	cpu0, err := cpuOf(pid)
	if err != nil {
		return result{}, err
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
	for range publishers {
		wg.Go(func() {
			for b := range batches {
				if err := publish(b); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	for w := range workers {
		wg.Go(func() {
			if err := consume(w, &done, &lat); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cpu1, err := cpuOf(pid)
	if err != nil {
		return result{}, err
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
		rate:        float64(events) / elapsed.Seconds(),
		cpuPerEvent: float64((cpu1 - cpu0).Microseconds()) / float64(events),
		pull50:      p(lat.pull, 0.50), pull99: p(lat.pull, 0.99),
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
	addr, err := freeAddr()
	if err != nil {
		return result{}, err
	}
	host, port, _ := net.SplitHostPort(addr)
	srv, err := start(bin, []string{"-js", "-a", host, "-p", port, "-sd", ".", "-m", "0"}, nil, io.Discard)
	if err != nil {
		return result{}, err
	}
	defer srv.stop()
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
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}, Storage: jetstream.MemoryStorage}); err != nil {
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
			// As Herald's pull (HERALD_RECEIVE_WAIT 0): what is there now.
			b, err := cons.FetchNoWait(pullLimit)
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
				time.Sleep(200 * time.Microsecond) // caught up with the publishers
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
	return measure(srv.cmd.Process.Pid, events, publish, consume, msgs, workers)
}

// runHerald is one Herald run: a fresh `herald serve` on in-memory defaults.
func runHerald(bin string, msgs [][]byte, events, workers int) (result, error) {
	addr, err := freeAddr()
	if err != nil {
		return result{}, err
	}
	srv, err := start(bin, []string{"serve"}, []string{"HERALD_ADDR=" + addr, "HERALD_DEV_TOKEN=" + token, "HERALD_LOG_LEVEL=warn"}, os.Stderr)
	if err != nil {
		return result{}, err
	}
	defer srv.stop()
	base := "http://" + addr
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	do := func(method, path string, body []byte) ([]byte, int, error) {
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
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
		b, err := io.ReadAll(res.Body)
		return b, res.StatusCode, err
	}
	var body []byte
	var status int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if body, status, err = do("POST", "/v1/event-destinations", []byte(`{"type":"DURABLE_CONSUMER"}`)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("herald did not start: %w", err)
		}
	}
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &d); err != nil || status != http.StatusCreated || d.ID == "" {
		return result{}, fmt.Errorf("create destination: status %d: %.200s", status, body)
	}
	publish := func(batch [][]byte) error {
		var buf bytes.Buffer
		buf.WriteString(`{"events":[`)
		for i, m := range batch {
			if i > 0 {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, `{"event_type":"bench.orders.%d","resource":{"resource_id":"/orders/%d"},"message":%s}`, i%10, i, m)
		}
		buf.WriteString(`]}`)
		res, status, err := do("POST", "/api/v1beta/events/batch", buf.Bytes())
		if err != nil {
			return err
		}
		if status != http.StatusOK || bytes.Contains(res, []byte(`"success":false`)) {
			return fmt.Errorf("publish: status %d: %.300s", status, res)
		}
		return nil
	}
	pullPath := "/v1/event-destinations/" + d.ID + "/pull?limit=" + strconv.Itoa(pullLimit)
	ackPath := "/v1/event-destinations/" + d.ID + "/acknowledge"
	consume := func(w int, done *atomic.Int64, lat *latencies) error {
		path := pullPath + "&workerId=peer-" + strconv.Itoa(w)
		for done.Load() < int64(events) {
			t0 := time.Now()
			res, status, err := do("POST", path, nil)
			if err != nil {
				return err
			}
			if status == http.StatusNoContent {
				time.Sleep(200 * time.Microsecond) // caught up with the publishers
				continue
			}
			if status != http.StatusOK {
				return fmt.Errorf("pull: status %d: %.200s", status, res)
			}
			pull := time.Since(t0)
			var l struct {
				LeaseID    string            `json:"leaseId"`
				Generation int64             `json:"generation"`
				Events     []json.RawMessage `json:"events"`
			}
			if err := json.Unmarshal(res, &l); err != nil {
				return fmt.Errorf("pull body: %w", err)
			}
			t0 = time.Now()
			ack := fmt.Appendf(nil, `{"leaseId":%q,"generation":%d,"status":"ok"}`, l.LeaseID, l.Generation)
			res, status, err = do("POST", ackPath, ack)
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				return fmt.Errorf("ack: status %d: %.200s", status, res)
			}
			lat.add(pull, time.Since(t0))
			done.Add(int64(len(l.Events)))
		}
		return nil
	}
	return measure(srv.cmd.Process.Pid, events, publish, consume, msgs, workers)
}
