package bench_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/heraldevents/herald/local"
)

// Shape of the workload. Every figure in docs/benchmarks.md comes from these.
const (
	eventsPerRound = 10_000 // events published and consumed per b.N iteration
	publishBatch   = 100    // events per POST /api/v1beta/events/batch
	pullLimit      = 100    // ?limit= of every pull
	messageBytes   = 1024   // JSON encoding of each event's message
	publishers     = 2
	workers        = 4
)

// harness is a running Herald with one durable consumer and a client.
type harness struct {
	base, token, dest string
	hc                *http.Client
	batchBody         []byte // one publish request of publishBatch events
}

func newHarness(b *testing.B) *harness {
	b.Helper()
	h := local.Start(b)
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	hr := &harness{base: h.URL, token: h.Token, hc: &http.Client{Transport: tr}}

	res := hr.do(b, "POST", "/v1/event-destinations", []byte(`{"type":"DURABLE_CONSUMER"}`), http.StatusCreated)
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res, &d); err != nil || d.ID == "" {
		b.Fatalf("create destination: %v %s", err, res)
	}
	hr.dest = d.ID

	pad := strings.Repeat("x", messageBytes-len(`{"pad":""}`))
	events := make([]map[string]any, publishBatch)
	for i := range events {
		events[i] = map[string]any{
			"event_type": "bench.tick",
			"resource":   map[string]string{"resource_id": fmt.Sprintf("/bench/%d", i)},
			"message":    json.RawMessage(`{"pad":"` + pad + `"}`),
		}
	}
	hr.batchBody, _ = json.Marshal(map[string]any{"events": events})
	return hr
}

// do sends one request and returns the body, failing on any other status.
// It is safe for goroutines: it reports with b.Error, not b.Fatal.
func (h *harness) do(b *testing.B, method, path string, body []byte, want int) []byte {
	res, status, err := h.send(method, path, body)
	if err != nil || status != want {
		b.Errorf("%s %s: status %d (want %d), err %v: %.200s", method, path, status, want, err, res)
		return nil
	}
	return res
}

func (h *harness) send(method, path string, body []byte) ([]byte, int, error) {
	req, err := http.NewRequest(method, h.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := h.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	if res.ContentLength >= 0 {
		// One buffer of the announced size: the client's own copying
		// should not weigh on the server's figures.
		b := make([]byte, res.ContentLength)
		_, err := io.ReadFull(res.Body, b)
		return b, res.StatusCode, err
	}
	b, err := io.ReadAll(res.Body)
	return b, res.StatusCode, err
}

// publish sends rounds of batches, n events in all, split across
// publishers goroutines.
func (h *harness) publish(b *testing.B, n int) {
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := p; i*publishBatch < n; i += publishers {
				h.do(b, "POST", "/api/v1beta/events/batch", h.batchBody, http.StatusOK)
			}
		})
	}
	wg.Wait()
}

// latencies collects request durations from many goroutines.
type latencies struct {
	mu        sync.Mutex
	pull, ack []time.Duration
}

// consume runs workers that pull and acknowledge until n events are
// committed, recording the latency of every pull that returned events and
// of every acknowledgement.
func (h *harness) consume(b *testing.B, n int, lat *latencies) {
	var done atomic.Int64
	pullPath := "/v1/event-destinations/" + h.dest + "/pull?limit=" + fmt.Sprint(pullLimit)
	ackPath := "/v1/event-destinations/" + h.dest + "/acknowledge"
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var pulls, acks []time.Duration
			defer func() {
				lat.mu.Lock()
				lat.pull = append(lat.pull, pulls...)
				lat.ack = append(lat.ack, acks...)
				lat.mu.Unlock()
			}()
			path := pullPath + "&workerId=bench-" + fmt.Sprint(w)
			for done.Load() < int64(n) && !b.Failed() {
				t0 := time.Now()
				body, status, err := h.send("POST", path, nil)
				if err != nil {
					b.Errorf("pull: %v", err)
					return
				}
				switch status {
				case http.StatusOK:
				case http.StatusNoContent:
					time.Sleep(200 * time.Microsecond) // caught up with the publishers
					continue
				default:
					b.Errorf("pull: status %d: %.200s", status, body)
					return
				}
				pulls = append(pulls, time.Since(t0))
				leaseID, generation, n, err := readLease(body)
				if err != nil {
					b.Errorf("pull body: %v", err)
					return
				}
				ack := fmt.Appendf(nil, `{"leaseId":%q,"generation":%d,"status":"ok"}`, leaseID, generation)
				t0 = time.Now()
				if res := h.do(b, "POST", ackPath, ack, http.StatusOK); !bytes.Contains(res, []byte(`"committed"`)) {
					b.Errorf("ack: %s", res)
					return
				}
				acks = append(acks, time.Since(t0))
				done.Add(int64(n))
			}
		})
	}
	wg.Wait()
}

// usage is what a measured stretch cost the process.
type usage struct {
	mallocs, bytes uint64
	cpu            time.Duration // user + system CPU time
}

// snapshot reads the process's counters.
func snapshot() usage {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return usage{mallocs: ms.Mallocs, bytes: ms.TotalAlloc, cpu: cpu}
}

func (u usage) since(before usage) usage {
	return usage{mallocs: u.mallocs - before.mallocs, bytes: u.bytes - before.bytes, cpu: u.cpu - before.cpu}
}

func (u usage) add(o usage) usage {
	return usage{mallocs: u.mallocs + o.mallocs, bytes: u.bytes + o.bytes, cpu: u.cpu + o.cpu}
}

// eventStart opens every delivered event: pull writes the sequence first.
var eventStart = []byte(`{"sequence":"`)

// readLease reads what a worker needs to acknowledge a 200 pull body, and
// counts its events, without decoding the events: a real worker decodes
// them, but here the client's JSON decoding would outweigh the server's
// whole pull path on the same two cores and hide what Herald costs. The
// benchmark's events hold no "sequence" of their own, so counting the
// openings is exact.
func readLease(body []byte) (leaseID string, generation int64, n int, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return "", 0, 0, err
	}
	for {
		key, err := dec.Token()
		if err != nil {
			return "", 0, 0, err
		}
		switch key {
		case "leaseId":
			err = dec.Decode(&leaseID)
		case "generation":
			err = dec.Decode(&generation)
		case "events":
			n = bytes.Count(body, eventStart)
			if leaseID == "" {
				return "", 0, 0, fmt.Errorf("events before leaseId")
			}
			return leaseID, generation, n, nil
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return "", 0, 0, err
		}
	}
}

// report adds the figures docs/benchmarks.md records. CPU time per event
// is the steadiest of them on a shared machine: wall-clock rates move with
// whatever else runs, CPU spent per event much less.
func report(b *testing.B, events int, elapsed time.Duration, u usage, lat *latencies) {
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(u.cpu.Microseconds())/float64(events), "cpu-µs/event")
	mallocs, bytes := u.mallocs, u.bytes
	b.ReportMetric(float64(mallocs)/float64(events), "allocs/event")
	b.ReportMetric(float64(bytes)/float64(events), "B/event")
	ms := func(ds []time.Duration, p float64) float64 {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
	}
	if len(lat.pull) > 0 {
		b.ReportMetric(ms(lat.pull, 0.50), "pull-p50-ms")
		b.ReportMetric(ms(lat.pull, 0.99), "pull-p99-ms")
	}
	if len(lat.ack) > 0 {
		b.ReportMetric(ms(lat.ack, 0.50), "ack-p50-ms")
		b.ReportMetric(ms(lat.ack, 0.99), "ack-p99-ms")
	}
}

// measure runs round b.N times and reports the totals. Allocation counts
// are the whole process's: client and server share it, as they share the
// machine in production-like runs on one host.
func measure(b *testing.B, round func(lat *latencies) int) {
	var lat latencies
	var elapsed time.Duration
	events := 0
	runtime.GC()
	before := snapshot()
	for b.Loop() {
		t0 := time.Now()
		events += round(&lat)
		elapsed += time.Since(t0)
	}
	b.StopTimer()
	report(b, events, elapsed, snapshot().since(before), &lat)
}

// BenchmarkEndToEnd publishes eventsPerRound 1 KiB events in batches of
// 100 while workers pull (limit 100) and acknowledge them, all over
// loopback HTTP; an iteration ends when every event is committed.
func BenchmarkEndToEnd(b *testing.B) {
	h := newHarness(b)
	measure(b, func(lat *latencies) int {
		var wg sync.WaitGroup
		wg.Go(func() { h.publish(b, eventsPerRound) })
		h.consume(b, eventsPerRound, lat)
		wg.Wait()
		return eventsPerRound
	})
}

// BenchmarkPullAcknowledge times only the consuming side: each iteration's
// events are published with the timer stopped, then drained.
func BenchmarkPullAcknowledge(b *testing.B) {
	h := newHarness(b)
	var lat latencies
	var elapsed time.Duration
	var total usage
	events := 0
	for range b.N {
		b.StopTimer()
		h.publish(b, eventsPerRound)
		runtime.GC()
		before := snapshot()
		b.StartTimer()
		t0 := time.Now()
		h.consume(b, eventsPerRound, &lat)
		elapsed += time.Since(t0)
		total = total.add(snapshot().since(before))
		events += eventsPerRound
	}
	report(b, events, elapsed, total, &lat)
}

// BenchmarkPublish times only the publishing side, into one durable
// consumer's subscription (left undrained: 3 rounds hold ~50 MB).
func BenchmarkPublish(b *testing.B) {
	h := newHarness(b)
	measure(b, func(*latencies) int {
		h.publish(b, eventsPerRound)
		return eventsPerRound
	})
}
