package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
)

// floodBody is a publish batch of delivery.MaxBatchEvents events with
// messages of about 250 KB each: some 25 MB, near the largest batch.
func floodBody() []byte {
	msg := `{"p":"` + strings.Repeat("x", 250_000) + `"}`
	var b bytes.Buffer
	b.WriteString(`{"events":[`)
	// Twenty events of 250 KB: the largest batch body a publish takes
	// (publish.MaxBatchBody, 5 MiB).
	for i := range 20 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"event_type":"flood.e","message":%s}`, msg)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// floodResult is what one flood of concurrent batch publishes did.
type floodResult struct {
	ok, shed   int64   // answers 200 and 503
	peakHeapMB float64 // highest HeapInuse sampled during the flood
	retryAfter string  // a 503's Retry-After
}

// flood opens a local-profile App with maxBytes (0: no bound), sends n concurrent batch publishes of body,
// and samples the heap while they run.
func flood(t testing.TB, maxBytes int64, n int, body []byte) floodResult {
	ctx := context.Background()
	cfg := config.Defaults(config.Local)
	cfg.DevToken = "dev-token-0123456789"
	cfg.TopicURL, cfg.StoreURL = "mem://flood-"+fmt.Sprint(time.Now().UnixNano()), "mem://flood/key"
	cfg.Source, cfg.MaxInflightBytes = "/test", maxBytes
	a, err := app.Open(ctx, cfg, app.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close()) }()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	// Expect: 100-continue, as a client that sends large bodies should:
	// a request the server sheds is answered before its body is sent, so
	// the client reads the 503 instead of writing into a closed
	// connection.
	tr := &http.Transport{ExpectContinueTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}

	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var res floodResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := http.NewRequest("POST", srv.URL+"/api/v1beta/events/batch", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer dev-token-0123456789")
			req.Header.Set("Expect", "100-continue")
			resp, err := hc.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			switch resp.StatusCode {
			case http.StatusOK:
				res.ok++
			case http.StatusServiceUnavailable:
				res.shed++
				res.retryAfter = resp.Header.Get("Retry-After")
			default:
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	res.peakHeapMB = float64(peak.Load()) / (1 << 20)
	return res
}

// TestAdmissionBoundsMemory (issue: twenty concurrent 26 MB batch
// publishes took the process to 2.56 GB; a batch body is now capped at
// 5 MiB): with the default bound of 64 MiB of request bodies in progress,
// a flood of forty of the largest batches (200 MB in all) is
// partly shed with 503 and Retry-After, and the heap stays under a small
// multiple of the bound (the body, its events and their CloudEvents), far
// below what the flood would take unbounded (BenchmarkPublishFlood).
func TestAdmissionBoundsMemory(t *testing.T) {
	body := floodBody()
	res := flood(t, config.DefaultMaxInflightBytes, 40, body)
	t.Logf("bounded flood: %d published, %d shed, peak heap %.0f MiB", res.ok, res.shed, res.peakHeapMB)
	require.Positive(t, res.ok, "some batches get in")
	require.Positive(t, res.shed, "the rest are shed")
	require.Equal(t, "1", res.retryAfter)
	// The bound is 64 MiB of bodies; each admitted body is decoded into
	// its events and encoded into CloudEvents (about 4 copies), and the
	// flood's own request bodies share one buffer.
	require.Less(t, res.peakHeapMB, 6.0*config.DefaultMaxInflightBytes/(1<<20), "heap under the bound's multiple")
}

// BenchmarkPublishFlood reports the peak heap of twenty concurrent 25 MB
// batch publishes, bounded (the default) and unbounded. Run it alone for
// the process's peak RSS as well (VmHWM in /proc/self/status):
//
//	go test ./functions/app -run '^$' -bench PublishFlood/unbounded -benchtime 1x
func BenchmarkPublishFlood(b *testing.B) {
	body := floodBody()
	for _, c := range []struct {
		name     string
		maxBytes int64
	}{{"bounded", config.DefaultMaxInflightBytes}, {"unbounded", 0}} {
		b.Run(c.name, func(b *testing.B) {
			var res floodResult
			for b.Loop() {
				res = flood(b, c.maxBytes, 40, body)
			}
			b.ReportMetric(res.peakHeapMB, "peak-heap-MiB")
			b.ReportMetric(float64(res.shed), "shed")
			if st, err := os.ReadFile("/proc/self/status"); err == nil {
				for line := range strings.Lines(string(st)) {
					if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						var n float64
						_, _ = fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), &n)
						b.ReportMetric(n/1024, "process-peak-RSS-MiB")
					}
				}
			}
		})
	}
}
