package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	cpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/local"
)

// Shape of the stream benchmarks (docs/benchmarks.md, "Streams: WebSocket
// vs gRPC vs SSE"). Every iteration publishes streamEvents 1 KiB events
// (batches of publishBatch, publishers goroutines) while one stream
// consumer receives them.
const (
	streamEvents = 10_000
	streamQueue  = "bench-q"
	streamType   = "bench.tick"
	// streamWindow is the WebSocket client's demand window: it demands
	// this much at open, then streamAckBatch more each time it acks.
	streamWindow = 100
	// streamAckBatch is how many delivered events a client acks in one
	// frame (WebSocket) or message (gRPC). Both stay within the server's
	// 100 unsettled events per session.
	streamAckBatch = 50
	streamWait     = 60 * time.Second // bounds one iteration
	withAcksMethod = "/nvidia.omniverse.notifications.consumer.v1beta.EventConsumerService/ConsumeDurableEventsWithAcks"
)

// stampPlaceholder is the "t" of the batch template: 16 digits, like a
// Unix time in microseconds, so that stamping keeps the body's length.
var stampPlaceholder = []byte(`{"t":1000000000000000,`)

// streamLoad is how an iteration publishes: events in batches of batch,
// either as fast as publishers goroutines can (every 0), or one batch
// every interval from one goroutine. A backlog load publishes before the
// stream opens, outside the measured time.
type streamLoad struct {
	name          string
	events, batch int
	every         time.Duration
	backlog       bool
}

// streamLoads are the sub-benchmarks of every stream benchmark: "burst"
// measures throughput while publishing (the publishers outrun the stream,
// so its latency is mostly queueing behind the backlog); "backlog" only
// drains events published beforehand: the stream's own cost, without
// publishing's; "paced" publishes 1,000 events/s in batches of 10, well
// below every stream's throughput, so its latency is the pipeline's own.
var streamLoads = []streamLoad{
	{name: "burst", events: streamEvents, batch: publishBatch},
	{name: "backlog", events: streamEvents, batch: publishBatch, backlog: true},
	{name: "paced", events: 2_000, batch: 10, every: 10 * time.Millisecond},
}

// streamHarness is a running Herald whose only subscriber is the stream
// under test, and a publisher whose events carry their publish time.
type streamHarness struct {
	*harness
	templates map[int][]byte // a batch of n events, "t" unstamped
}

// newStreamHarness starts Herald; with durable it also creates the
// durable queue streamQueue on streamType. Unlike newHarness it creates no
// durable consumer: that subscription would receive every event too.
func newStreamHarness(b *testing.B, durable bool) *streamHarness {
	b.Helper()
	inst := local.Start(b)
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	h := &streamHarness{harness: &harness{base: inst.URL, token: inst.Token, hc: &http.Client{Transport: tr}}}
	if durable {
		h.do(b, "POST", "/api/v1beta/queues/durable",
			[]byte(`{"queue_id":"`+streamQueue+`","filter_groups":[{"event_type":"`+streamType+`"}]}`), http.StatusCreated)
	}
	// {"t":…,"pad":"xxx…"} is messageBytes long.
	pad := strings.Repeat("x", messageBytes-len(`{"t":1000000000000000,"pad":""}`))
	h.templates = map[int][]byte{}
	for _, l := range streamLoads {
		events := make([]map[string]any, l.batch)
		for i := range events {
			events[i] = map[string]any{
				"event_type": streamType,
				"resource":   map[string]string{"resource_id": fmt.Sprintf("/bench/%d", i)},
				"message":    json.RawMessage(string(stampPlaceholder) + `"pad":"` + pad + `"}`),
			}
		}
		h.templates[l.batch], _ = json.Marshal(map[string]any{"events": events})
	}
	return h
}

// publish publishes l.events events as l says; each batch's events carry
// the time its request was sent ("t", Unix µs).
func (h *streamHarness) publish(b *testing.B, l streamLoad) {
	batch := func() {
		stamp := fmt.Appendf(nil, `{"t":%d,`, time.Now().UnixMicro())
		h.do(b, "POST", "/api/v1beta/events/batch", bytes.ReplaceAll(h.templates[l.batch], stampPlaceholder, stamp), http.StatusOK)
	}
	if l.every > 0 {
		t := time.NewTicker(l.every)
		defer t.Stop()
		for sent := 0; sent < l.events; sent += l.batch {
			batch()
			<-t.C
		}
		return
	}
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := p; i*l.batch < l.events; i += publishers {
				batch()
			}
		})
	}
	wg.Wait()
}

// feed starts publishing l's events and returns a wait for the
// publishers. A backlog load publishes them all first and then calls
// restart, which starts the iteration's measurement afresh.
func (h *streamHarness) feed(b *testing.B, l streamLoad, restart func()) (wait func()) {
	if l.backlog {
		h.publish(b, l)
		restart()
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() { h.publish(b, l) })
	return wg.Wait
}

// runLoads runs round as one sub-benchmark per streamLoads entry.
func runLoads(b *testing.B, round func(b *testing.B, l streamLoad, lat *[]time.Duration, restart func())) {
	for _, l := range streamLoads {
		b.Run(l.name, func(b *testing.B) {
			measureStream(b, !l.backlog, func(lat *[]time.Duration, restart func()) int {
				round(b, l, lat, restart)
				return l.events
			})
		})
	}
}

// streamLatency is how long ago an event carrying message member
// "t":µs was published: it reads the first `{"t":` in data without
// decoding the rest (the benchmark's messages start with it, and no other
// member of a delivered event is called "t").
func streamLatency(data []byte) (time.Duration, error) {
	i := bytes.Index(data, []byte(`{"t":`))
	if i < 0 {
		return 0, fmt.Errorf("no publish time in %.200s", data)
	}
	us, _, err := leadingInt(data[i+len(`{"t":`):])
	if err != nil {
		return 0, err
	}
	return time.Since(time.UnixMicro(us)), nil
}

// leadingInt parses the decimal digits data starts with.
func leadingInt(data []byte) (int64, int, error) {
	n := 0
	for n < len(data) && data[n] >= '0' && data[n] <= '9' {
		n++
	}
	v, err := strconv.ParseInt(string(data[:n]), 10, 64)
	return v, n, err
}

// measureStream runs round b.N times and reports events/s, publish to
// receipt latency (when latency), and the process's CPU and allocations
// per event (publishing included, unless a round restarts the measurement
// after it: client, server and publisher share the process).
func measureStream(b *testing.B, latency bool, round func(lat *[]time.Duration, restart func()) int) {
	var lat []time.Duration
	var elapsed time.Duration
	var u usage
	events := 0
	for b.Loop() {
		var t0 time.Time
		var before usage
		restart := func() {
			runtime.GC()
			before, t0 = snapshot(), time.Now()
		}
		restart()
		events += round(&lat, restart)
		elapsed += time.Since(t0)
		u = u.add(snapshot().since(before))
	}
	b.StopTimer()
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(u.cpu.Microseconds())/float64(events), "cpu-µs/event")
	b.ReportMetric(float64(u.mallocs)/float64(events), "allocs/event")
	b.ReportMetric(float64(u.bytes)/float64(events), "B/event")
	if latency && len(lat) > 0 {
		slices.Sort(lat)
		ms := func(p float64) float64 {
			return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
		}
		b.ReportMetric(ms(0.50), "lat-p50-ms")
		b.ReportMetric(ms(0.99), "lat-p99-ms")
	}
}

// BenchmarkStreamWebSocket: a gorilla client opens durable queue
// streamQueue over GET /api/v1beta/events/websocket, demands
// streamWindow, and for every streamAckBatch events received acks them in
// one frame and demands as many again, while an iteration's events are
// published (streamLoads). An iteration ends when every event is
// acknowledged.
func BenchmarkStreamWebSocket(b *testing.B) {
	h := newStreamHarness(b, true)
	endpoint := "ws" + strings.TrimPrefix(h.base, "http") + "/api/v1beta/events/websocket"
	hdr := http.Header{"Authorization": {"Bearer " + h.token}}
	runLoads(b, func(b *testing.B, l streamLoad, lat *[]time.Duration, restart func()) {
		defer h.feed(b, l, restart)() // publishes first when l.backlog
		ws, _, err := (&websocket.Dialer{HandshakeTimeout: streamWait}).Dial(endpoint, hdr)
		if err != nil {
			b.Fatalf("dial: %v", err)
		}
		defer ws.Close()
		_ = ws.SetReadDeadline(time.Now().Add(streamWait))
		_ = ws.SetWriteDeadline(time.Now().Add(streamWait))
		send := func(frame string) {
			if err := ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
				b.Fatalf("send: %v", err)
			}
		}
		read := func() []byte {
			_, data, err := ws.ReadMessage()
			if err != nil {
				b.Fatalf("read: %v", err)
			}
			return data
		}
		send(`{"type":"open","stream":"durable","queue_id":"` + streamQueue + `"}`)
		if f := read(); !bytes.HasPrefix(f, []byte(`{"type":"connected"`)) {
			b.Fatalf("open: %s", f)
		}
		send(`{"type":"demand","n":` + strconv.Itoa(streamWindow) + `}`)

		tags := make([]int64, 0, streamAckBatch)
		ack := func() {
			f := []byte(`{"type":"ack","delivery_tags":[`)
			for i, tag := range tags {
				if i > 0 {
					f = append(f, ',')
				}
				f = strconv.AppendInt(f, tag, 10)
			}
			f = append(f, "]}"...)
			if err := ws.WriteMessage(websocket.TextMessage, f); err != nil {
				b.Fatalf("ack: %v", err)
			}
			tags = tags[:0]
		}
		received, acked := 0, 0
		for acked < l.events {
			f := read()
			switch {
			case bytes.HasPrefix(f, []byte(`{"type":"event","delivery_tag":`)):
				d, err := streamLatency(f)
				if err != nil {
					b.Fatal(err)
				}
				*lat = append(*lat, d)
				tag, _, err := leadingInt(f[len(`{"type":"event","delivery_tag":`):])
				if err != nil {
					b.Fatalf("event frame: %v", err)
				}
				tags = append(tags, tag)
				received++
				if len(tags) == streamAckBatch || received == l.events {
					n := len(tags)
					ack()
					if received < l.events {
						send(`{"type":"demand","n":` + strconv.Itoa(n) + `}`)
					}
				}
			case bytes.HasPrefix(f, []byte(`{"type":"settled"`)):
				var s struct{ Acked, Skipped int }
				if err := json.Unmarshal(f, &s); err != nil || s.Skipped != 0 {
					b.Fatalf("settled: %v %s", err, f)
				}
				acked += s.Acked
			default:
				b.Fatalf("unexpected frame: %.300s", f)
			}
		}
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	})
}

// BenchmarkStreamGRPC: the same over ConsumeDurableEventsWithAcks with a
// plain grpc-go client (HTTP/2 cleartext): every streamAckBatch events
// received are acked in one request message; the server's 100 unsettled
// events per session is the window. The client decodes each response (as
// grpc-go must) and reads "t" from the message Struct.
func BenchmarkStreamGRPC(b *testing.B) {
	h := newStreamHarness(b, true)
	conn, err := grpc.NewClient(strings.TrimPrefix(h.base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	runLoads(b, func(b *testing.B, l streamLoad, lat *[]time.Duration, restart func()) {
		defer h.feed(b, l, restart)() // publishes first when l.backlog
		ctx, cancel := context.WithTimeout(context.Background(), streamWait)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+h.token)
		s, err := conn.NewStream(ctx, desc, withAcksMethod)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{QueueId: streamQueue}); err != nil {
			b.Fatal(err)
		}

		var tags []int64
		for received := 0; received < l.events; {
			res := &cpb.ConsumeDurableEventsWithAcksResponse{}
			if err := s.RecvMsg(res); err != nil {
				b.Fatalf("receive: %v", err)
			}
			for _, ev := range res.GetEvents() {
				us := int64(ev.GetMessage().GetFields()["t"].GetNumberValue())
				*lat = append(*lat, time.Since(time.UnixMicro(us)))
				received++
			}
			tags = append(tags, res.GetDeliveryTag())
			if len(tags) == streamAckBatch || received == l.events {
				if err := s.SendMsg(&cpb.ConsumeDurableEventsWithAcksRequest{AckDeliveryTags: tags}); err != nil {
					b.Fatalf("ack: %v", err)
				}
				tags = nil
			}
		}
		// Half-close: the server settles what was sent, then ends OK.
		if err := s.CloseSend(); err != nil {
			b.Fatal(err)
		}
		if err := s.RecvMsg(&cpb.ConsumeDurableEventsWithAcksResponse{}); !errors.Is(err, io.EOF) {
			b.Fatalf("end of stream: %v", err)
		}
	})
}

// BenchmarkStreamSSE: for comparison, a non-durable SSE stream
// (GET /api/v1beta/events/stream), which has no flow control and
// acknowledges each event once written. One connection serves every
// iteration, so that no earlier iteration's queue lingers and receives
// copies of the events.
func BenchmarkStreamSSE(b *testing.B) {
	h := newStreamHarness(b, false)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	groups := url.QueryEscape(`[{"event_type":"` + streamType + `"}]`)
	req, err := http.NewRequestWithContext(ctx, "GET", h.base+"/api/v1beta/events/stream?filter_groups="+groups, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	res, err := h.hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		b.Fatalf("stream: status %d", res.StatusCode)
	}
	r := bufio.NewReaderSize(res.Body, 64<<10)
	// next returns the data line of the next frame of type event.
	next := func(b *testing.B, event string) []byte {
		typ := ""
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				b.Fatalf("read stream: %v", err)
			}
			switch {
			case bytes.HasPrefix(line, []byte("event: ")):
				typ = string(bytes.TrimSpace(line[len("event: "):]))
			case bytes.HasPrefix(line, []byte("data: ")) && typ == event:
				return line
			case bytes.HasPrefix(line, []byte("data: ")):
				b.Fatalf("unexpected %s frame: %.300s", typ, line)
			}
		}
	}
	next(b, "connected")
	runLoads(b, func(b *testing.B, l streamLoad, lat *[]time.Duration, restart func()) {
		defer h.feed(b, l, restart)() // publishes first when l.backlog
		for range l.events {
			d, err := streamLatency(next(b, "event"))
			if err != nil {
				b.Fatal(err)
			}
			*lat = append(*lat, d)
		}
	})
}
