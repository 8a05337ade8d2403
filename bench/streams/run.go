package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/heraldevents/herald/bench/internal/stack"
)

const (
	// pgStatsLag is how long the idle phase waits before it reads
	// PostgreSQL's counters (PGSTAT_IDLE_INTERVAL, 10 s, and a margin).
	pgStatsLag = 11 * time.Second
	// shutdownGrace is how long Herald may take to exit once interrupted.
	shutdownGrace = 2 * time.Minute
	token         = "streams-bench-token"
	eventType     = "bench.fanout"
	// padBytes pads each event's message to about 256 bytes, a small
	// notification.
	padBytes = 200
)

// config is one run's settings (the flags of main).
type config struct {
	herald, natsBin  string
	stack, transport string
	n, concurrency   int
	events           int
	every            time.Duration
	drain, idle      time.Duration
	srcIPs           int
	log              io.Writer // Herald's stderr
	// heapProfile, when set, is where Herald's heap profile
	// (/debug/pprof/heap) is written at the end of the idle phase.
	heapProfile string
	// cpuProfile, when set, is where Herald's CPU profile of the
	// fan-out phase (/debug/pprof/profile) is written.
	cpuProfile string
	// idleCPUProfile, when set, is where Herald's CPU profile of the
	// idle phase is written.
	idleCPUProfile string
}

// result is what one run measured. Durations are as measured; CPU is a
// percentage of one core.
type result struct {
	stack, transport string
	n                int

	openP50, openP99 time.Duration
	opensPerSec      float64
	openFailed       int
	openErr          string // the first failure, if any

	fanP50, fanP99, fanMax time.Duration // per event: until the last stream had it
	delP50, delP99         time.Duration // per delivery
	delivered, missing     int
	fanCPU                 time.Duration // Herald's CPU per event during the fan-out phase
	clientCPU              time.Duration // the load generator's, likewise
	duplicates             int
	streamErrs             int    // streams that ended before the run did
	streamErr              string // the first such end

	heraldCPU  float64            // % of one core while idle
	othersCPU  map[string]float64 // % of one core while idle, by process group
	pgXactPerS float64            // PostgreSQL transactions/s while idle; NaN without PostgreSQL
	pgRowsPerS float64            // rows inserted, updated or deleted per second while idle
	rssPer     float64            // KB per stream
	heapPer    float64            // KB per stream
	gorPer     float64            // goroutines per stream
	machineCPU float64            // % of all cores busy while idle, every process
	loadAvg    string             // /proc/loadavg's 1-minute figure when the run began

	shutdown       time.Duration // from SIGINT to Herald's exit, the streams closed
	shutdownKilled bool          // Herald had not exited within shutdownGrace
}

func ms2(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// print prints res on one line, in printHeader's columns.
func (r result) print(w io.Writer) {
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) }
	var others []string
	for _, k := range slices.Sorted(mapsKeys(r.othersCPU)) {
		others = append(others, fmt.Sprintf("%s %.1f", k, r.othersCPU[k]))
	}
	if len(others) == 0 {
		others = []string{"-"}
	}
	pg := "-"
	if r.pgXactPerS == r.pgXactPerS { // not NaN
		pg = fmt.Sprintf("%.1f (rows written %.1f)", r.pgXactPerS, r.pgRowsPerS)
	}
	fmt.Fprintf(w, "%-20s %d: %s/%s, %.0f, %d | %s/%s/%s, %s/%s, %d/%d of %d, CPU ms/event herald %.0f client %.0f | idle: %.1f, %s, %s, %.1f, %.1f, %.2f | machine %.0f%% busy, load %s\n",
		r.stack+"/"+r.transport, r.n, ms(r.openP50), ms(r.openP99), r.opensPerSec, r.openFailed,
		ms(r.fanP50), ms(r.fanP99), ms(r.fanMax), ms(r.delP50), ms(r.delP99), r.missing, r.duplicates, r.delivered+r.missing, ms2(r.fanCPU), ms2(r.clientCPU),
		r.heraldCPU, strings.Join(others, " "), pg, r.rssPer, r.heapPer, r.gorPer, r.machineCPU, r.loadAvg)
	killed := ""
	if r.shutdownKilled {
		killed = " (killed)"
	}
	fmt.Fprintf(w, "  shutdown with %d closed streams' queues: %.1f s%s\n", r.n, r.shutdown.Seconds(), killed)
	if r.openErr != "" {
		fmt.Fprintf(w, "  first open failure: %s\n", r.openErr)
	}
	if r.streamErr != "" {
		fmt.Fprintf(w, "  %d streams ended early; the first: %s\n", r.streamErrs, r.streamErr)
	}
}

func mapsKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// board records when each stream received each event: at[i*events+k] is
// the time since the run's start, in ns, at which stream i had event k
// (0: not yet). Each stream's reader writes its own row.
type board struct {
	events int
	at     []atomic.Int64
	got    atomic.Int64 // deliveries recorded
	dups   atomic.Int64
	start  time.Time
}

// record notes that stream i received event seq.
func (b *board) record(i, seq int) {
	if seq < 0 || seq >= b.events {
		b.dups.Add(1) // not an event of this run: counted as extra
		return
	}
	now := int64(time.Since(b.start))
	if now == 0 {
		now = 1
	}
	if !b.at[i*b.events+seq].CompareAndSwap(0, now) {
		b.dups.Add(1)
		return
	}
	b.got.Add(1)
}

// streamEnds collects streams that ended before the run closed them.
type streamEnds struct {
	mu    sync.Mutex
	n     int
	first string
}

func (e *streamEnds) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if e.first == "" {
		e.first = err.Error()
	}
}

// run is one run: Herald on c.stack, c.n streams over c.transport.
func run(c config) (result, error) {
	res := result{stack: c.stack, transport: c.transport, n: c.n, pgXactPerS: nan()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.loadAvg = strings.Fields(string(b))[0]
	}
	stk, err := stack.Open(c.stack, c.natsBin)
	if err != nil {
		return res, err
	}
	defer stk.Close()
	addr, err := stack.FreeAddr()
	if err != nil {
		return res, err
	}
	debugAddr, err := stack.FreeAddr()
	if err != nil {
		return res, err
	}
	env := append([]string{"HERALD_ADDR=" + addr, "HERALD_DEV_TOKEN=" + token, "HERALD_LOG_LEVEL=warn", "HERALD_PPROF_ADDR=" + debugAddr}, stk.Env...)
	srv, err := stack.Start(c.herald, []string{"serve"}, env, c.log)
	if err != nil {
		return res, err
	}
	defer srv.Stop() // if the run ends early
	pid := srv.Cmd.Process.Pid
	base := "http://" + addr
	hc := &http.Client{Timeout: 30 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := hc.Get(base + "/health")
		if err == nil {
			_ = r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("herald did not start: %v", err)
		}
	}
	rss0, err := rssKB(pid)
	if err != nil {
		return res, err
	}
	heap0, err := heapInuse("http://" + debugAddr)
	if err != nil {
		return res, err
	}
	gor0, err := goroutines("http://" + debugAddr)
	if err != nil {
		return res, err
	}

	// Open.
	srcIPs := c.srcIPs
	if srcIPs <= 0 {
		srcIPs = (c.n + 1999) / 2000
	}
	cl, err := newClients(c.transport, addr, srcIPs)
	if err != nil {
		return res, err
	}
	defer cl.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &board{events: c.events, at: make([]atomic.Int64, c.n*c.events)}
	var ends streamEnds
	var readers sync.WaitGroup
	opens := make([]time.Duration, c.n)
	var failedMu sync.Mutex
	sem := make(chan struct{}, c.concurrency)
	var openers sync.WaitGroup
	t0 := time.Now()
	b.start = t0
	for i := range c.n {
		sem <- struct{}{}
		openers.Go(func() {
			defer func() { <-sem }()
			t := time.Now()
			s, err := cl.open(ctx, i)
			if err != nil {
				failedMu.Lock()
				res.openFailed++
				if res.openErr == "" {
					res.openErr = err.Error()
				}
				failedMu.Unlock()
				return
			}
			opens[i] = time.Since(t)
			readers.Go(func() {
				err := s.read(func(seq int) { b.record(i, seq) })
				if ctx.Err() == nil {
					if err == nil {
						err = errors.New("stream ended")
					}
					ends.add(err)
				}
			})
		})
	}
	openers.Wait()
	openTime := time.Since(t0)
	var ok []time.Duration
	for _, d := range opens {
		if d > 0 {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return res, fmt.Errorf("no stream opened: %s", res.openErr)
	}
	res.openP50, res.openP99 = pct(ok, 0.50), pct(ok, 0.99)
	res.opensPerSec = float64(len(ok)) / openTime.Seconds()

	// Fan-out.
	fh0, err := stack.CPUOf(pid)
	if err != nil {
		return res, err
	}
	fc0, err := stack.CPUOf(os.Getpid())
	if err != nil {
		return res, err
	}
	var profiled sync.WaitGroup
	if c.cpuProfile != "" {
		secs := int((time.Duration(c.events)*c.every + time.Second).Seconds())
		profiled.Go(func() {
			if err := save(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", debugAddr, secs), c.cpuProfile); err != nil {
				fmt.Fprintf(os.Stderr, "streams: CPU profile: %v\n", err)
			}
		})
		time.Sleep(100 * time.Millisecond) // let it start first
	}
	pub := make([]time.Duration, c.events)
	pad := strings.Repeat("x", padBytes)
	tick := time.NewTicker(c.every)
	for k := range c.events {
		body := fmt.Sprintf(`{"event":{"event_type":%q,"resource":{"resource_id":"/bench/%d"},"message":{"seq":%d,"pad":%q}}}`, eventType, k, k, pad)
		req, _ := http.NewRequest("POST", base+"/api/v1beta/events", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		pub[k] = time.Since(t0)
		r, err := hc.Do(req)
		if err != nil {
			return res, fmt.Errorf("publish: %w", err)
		}
		msg, _ := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if r.StatusCode != http.StatusOK {
			return res, fmt.Errorf("publish: status %d: %.200s", r.StatusCode, msg)
		}
		if k < c.events-1 {
			<-tick.C
		}
	}
	tick.Stop()
	want := int64(len(ok) * c.events)
	for deadline := time.Now().Add(c.drain); b.got.Load() < want && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	fh1, err := stack.CPUOf(pid)
	if err != nil {
		return res, err
	}
	fc1, err := stack.CPUOf(os.Getpid())
	if err != nil {
		return res, err
	}
	res.fanCPU, res.clientCPU = (fh1-fh0)/time.Duration(c.events), (fc1-fc0)/time.Duration(c.events)
	var fan, del []time.Duration
	for k := range c.events {
		var last time.Duration
		complete := true
		for i := range c.n {
			if opens[i] == 0 {
				continue
			}
			at := time.Duration(b.at[i*c.events+k].Load())
			if at == 0 {
				complete = false
				res.missing++
				continue
			}
			res.delivered++
			del = append(del, at-pub[k])
			last = max(last, at-pub[k])
		}
		if complete {
			fan = append(fan, last)
		}
	}
	res.duplicates = int(b.dups.Load())
	if len(fan) > 0 {
		res.fanP50, res.fanP99, res.fanMax = pct(fan, 0.50), pct(fan, 0.99), slices.Max(fan)
	}
	if len(del) > 0 {
		res.delP50, res.delP99 = pct(del, 0.50), pct(del, 0.99)
	}

	profiled.Wait()

	// Idle.
	if stk.Counters != nil {
		// A PostgreSQL backend that goes idle reports its statistics up
		// to 10 s later (PGSTAT_IDLE_INTERVAL): wait for the opens'
		// writes to be counted, so that the idle window counts only its
		// own.
		time.Sleep(pgStatsLag)
	}
	h0, err := stack.CPUOf(pid)
	if err != nil {
		return res, err
	}
	o0 := make([]time.Duration, len(stk.Others))
	for i, g := range stk.Others {
		if o0[i], err = g.CPU(); err != nil {
			return res, fmt.Errorf("%s CPU: %w", g.Name, err)
		}
	}
	var x0 map[string]int64
	if stk.Counters != nil {
		if x0, err = stk.Counters(); err != nil {
			return res, err
		}
	}
	busy0, total0, err := machineTicks()
	if err != nil {
		return res, err
	}
	i0 := time.Now()
	if c.idleCPUProfile != "" {
		// The profile covers the idle window; its own cost (a few ms of
		// Herald's CPU) is counted in the window.
		secs := max(int(c.idle.Seconds()), 1)
		if err := save(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", debugAddr, secs), c.idleCPUProfile); err != nil {
			fmt.Fprintf(os.Stderr, "streams: idle CPU profile: %v\n", err)
		}
		time.Sleep(time.Until(i0.Add(c.idle)))
	} else {
		time.Sleep(c.idle)
	}
	idle := time.Since(i0)
	h1, err := stack.CPUOf(pid)
	if err != nil {
		return res, err
	}
	res.heraldCPU = 100 * (h1 - h0).Seconds() / idle.Seconds()
	res.othersCPU = map[string]float64{}
	for i, g := range stk.Others {
		o1, err := g.CPU()
		if err != nil {
			return res, fmt.Errorf("%s CPU: %w", g.Name, err)
		}
		res.othersCPU[g.Name] = 100 * (o1 - o0[i]).Seconds() / idle.Seconds()
	}
	busy1, total1, err := machineTicks()
	if err != nil {
		return res, err
	}
	if total1 > total0 {
		res.machineCPU = 100 * float64(busy1-busy0) / float64(total1-total0)
	}
	rss1, err := rssKB(pid)
	if err != nil {
		return res, err
	}
	heap1, err := heapInuse("http://" + debugAddr)
	if err != nil {
		return res, err
	}
	gor1, err := goroutines("http://" + debugAddr)
	if err != nil {
		return res, err
	}
	if c.heapProfile != "" {
		if err := save("http://"+debugAddr+"/debug/pprof/heap", c.heapProfile); err != nil {
			return res, err
		}
	}
	if stk.Counters != nil {
		// The window's own statistics arrive late too; in a steady
		// idle state what arrives late at the end is what arrived late
		// at the start, so one more second for the snapshot suffices.
		time.Sleep(time.Second)
		x1, err := stk.Counters()
		if err != nil {
			return res, err
		}
		res.pgXactPerS = float64(x1["xact"]-x0["xact"]) / idle.Seconds()
		rows := func(x map[string]int64) int64 { return x["inserted"] + x["updated"] + x["deleted"] }
		res.pgRowsPerS = float64(rows(x1)-rows(x0)) / idle.Seconds()
	}
	open := float64(len(ok))
	res.rssPer = float64(rss1-rss0) / open
	res.heapPer = float64(heap1-heap0) / 1024 / open
	res.gorPer = float64(gor1-gor0) / open
	ends.mu.Lock()
	res.streamErrs, res.streamErr = ends.n, ends.first
	ends.mu.Unlock()
	cancel()
	cl.close()
	readers.Wait()
	// A clean shutdown hands every queue back to the store and deletes
	// the hub's broker subscription: give it the time it takes.
	res.shutdown, res.shutdownKilled = srv.StopWithin(shutdownGrace)
	return res, nil
}

// save writes what url serves to file.
func save(url, file string) error {
	r, err := http.Get(url)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func nan() float64 { var z float64; return z / z }

// pct is the p-quantile of ds (sorted in place).
func pct(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[int(p*float64(len(ds)-1)+0.5)]
}

// rssKB is process pid's resident set size (VmRSS), in KB.
func rssKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// heapInuse reads runtime memstats.HeapInuse (bytes) from /debug/vars.
func heapInuse(base string) (int64, error) {
	r, err := http.Get(base + "/debug/vars")
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	var v struct {
		Memstats struct{ HeapInuse int64 } `json:"memstats"`
	}
	if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
		return 0, fmt.Errorf("%s/debug/vars: %w", base, err)
	}
	return v.Memstats.HeapInuse, nil
}

// goroutines reads the goroutine count from /debug/pprof/goroutine's
// first line ("goroutine profile: total N").
func goroutines(base string) (int, error) {
	r, err := http.Get(base + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	line, err := bufio.NewReader(r.Body).ReadString('\n')
	if err != nil {
		return 0, err
	}
	_, n, ok := strings.Cut(strings.TrimSpace(line), "total ")
	if !ok {
		return 0, fmt.Errorf("goroutine profile: %q", line)
	}
	return strconv.Atoi(n)
}

// machineTicks reads /proc/stat's first line: the machine's busy and
// total CPU time in clock ticks (all cores).
func machineTicks() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))[1:]
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if i >= 8 { // guest times are counted in user already
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

// raiseFileLimit raises the soft limit on open files to the hard limit:
// every one of n streams holds a socket here and one in Herald (whose Go
// runtime raises its own soft limit to the hard one). It fails when the
// hard limit is too low for n streams and a reserve of 256.
func raiseFileLimit(n int) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Max < uint64(n)+256 {
		return fmt.Errorf("streams: the open-file limit is %d, too low for %d streams (raise it with ulimit -Hn)", l.Max, n)
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}
