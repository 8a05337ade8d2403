package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/local"
)

// receiver is an OTLP/HTTP trace receiver: it decodes what the SDK's
// exporter posts to /v1/traces with the protocol's own protobuf types.
type receiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "unexpected", http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (rc *receiver) named(name string) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rc.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func (rc *receiver) byID(id []byte) *tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, s := range rc.spans {
		if bytes.Equal(s.SpanId, id) {
			return s
		}
	}
	return nil
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return fmt.Sprint(v.IntValue)
			}
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// TestPublishPullAckTelemetry runs publish → pull → ack and publish →
// pull → nack through a local Herald with traces sent over OTLP/HTTP to a
// receiver and metrics served to a Prometheus scrape. Setup installs the
// global providers once per process, so this is the package's one
// end-to-end test.
func TestPublishPullAckTelemetry(t *testing.T) {
	rc := &receiver{}
	otlp := httptest.NewServer(rc)
	defer otlp.Close()
	promPort := strconv.Itoa(emulators.FreePort(t))
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.URL)
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", promPort)
	t.Setenv("OTEL_SERVICE_NAME", "herald-telemetry-test")
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tel.Shutdown(ctx)) }()
	require.True(t, telemetry.Enabled())
	require.Equal(t, "traces=otlp metrics=prometheus", telemetry.Exporters(), "what the start-up line names")

	h := local.Start(t)
	callOn := func(in *local.Instance, method, path string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			require.NoError(t, err)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, in.URL+path, rd)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+in.Token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, out
	}
	call := func(method, path string, body any) (int, []byte) {
		t.Helper()
		return callOn(h, method, path, body)
	}
	status, body := call("POST", "/v1/event-destinations", map[string]any{"type": "DURABLE_CONSUMER"})
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var dest struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(body, &dest))

	type lease struct {
		LeaseID    string            `json:"leaseId"`
		Generation int64             `json:"generation"`
		Events     []json.RawMessage `json:"events"`
	}
	type delivered struct {
		TraceParent string `json:"traceparent"`
	}
	round := func(ackStatus, wantOutcome string) delivered {
		status, body := call("POST", "/api/v1beta/events/batch", map[string]any{"events": []any{
			map[string]any{"event_type": "telemetry.test", "message": map[string]any{"n": 1}},
		}})
		require.Equal(t, http.StatusOK, status, "%s", body)
		status, body = call("POST", "/v1/event-destinations/"+dest.ID+"/pull?limit=10&workerId=w", nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
		var l lease
		require.NoError(t, json.Unmarshal(body, &l))
		require.Len(t, l.Events, 1)
		var d delivered
		require.NoError(t, json.Unmarshal(l.Events[0], &d))
		status, body = call("POST", "/v1/event-destinations/"+dest.ID+"/acknowledge",
			map[string]any{"leaseId": l.LeaseID, "generation": l.Generation, "status": ackStatus})
		require.Equal(t, http.StatusOK, status, "%s", body)
		require.Contains(t, string(body), wantOutcome)
		return d
	}
	first := round("ok", "committed")
	// The nacked event comes back on the next pull: its lease is requeued.
	round("failed", "requeued")

	// A second Herald, whose delivery limit is 1, follows one event from
	// publish through pull and a failed acknowledgement to the
	// dead-letter queue, and an operator discards it.
	h2 := local.Start(t, func(c *local.Config) { c.DeliveryLimit = 1 })
	call2 := func(method, path string, body any) (int, []byte) {
		t.Helper()
		return callOn(h2, method, path, body)
	}
	status, body = call2("POST", "/v1/event-destinations", map[string]any{"type": "DURABLE_CONSUMER"})
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var dest2 struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(body, &dest2))
	status, body = call2("POST", "/api/v1beta/events", map[string]any{"event": map[string]any{"event_type": "telemetry.dead", "message": map[string]any{}}})
	require.Equal(t, http.StatusOK, status, "%s", body)
	status, body = call2("POST", "/v1/event-destinations/"+dest2.ID+"/pull?limit=10&workerId=w", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var l2 lease
	require.NoError(t, json.Unmarshal(body, &l2))
	require.Len(t, l2.Events, 1)
	status, body = call2("POST", "/v1/event-destinations/"+dest2.ID+"/acknowledge",
		map[string]any{"leaseId": l2.LeaseID, "generation": l2.Generation, "status": "failed"})
	require.Equal(t, http.StatusOK, status, "%s", body)
	// Redelivering it would pass the limit: the pull dead-letters it and
	// finds nothing else.
	status, body = call2("POST", "/v1/event-destinations/"+dest2.ID+"/pull?limit=10&workerId=w", nil)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	status, body = call2("GET", "/api/v1beta/dead-letters", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var dls struct {
		DeadLetters []struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		} `json:"dead_letters"`
	}
	require.NoError(t, json.Unmarshal(body, &dls))
	require.Len(t, dls.DeadLetters, 1)
	require.Equal(t, "DELIVERY_LIMIT", dls.DeadLetters[0].Reason)
	status, body = call2("POST", "/api/v1beta/dead-letters/actions", map[string]any{"actions": []any{
		map[string]any{"id": dls.DeadLetters[0].ID, "action": "DISCARD"},
	}})
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Contains(t, string(body), "DISCARDED")

	// An SSE stream stays open until the scrape: its session is counted
	// by transport and queue kind.
	sseCtx, sseCancel := context.WithCancel(ctx)
	defer sseCancel()
	sseReq, err := http.NewRequestWithContext(sseCtx, "GET", h.URL+"/api/v1beta/events/stream", nil)
	require.NoError(t, err)
	sseReq.Header.Set("Authorization", "Bearer "+h.Token)
	sse, err := http.DefaultClient.Do(sseReq)
	require.NoError(t, err)
	defer sse.Body.Close()
	require.Equal(t, http.StatusOK, sse.StatusCode)
	require.NoError(t, tel.ForceFlush(ctx))

	// The delivered CloudEvent carries the publisher's trace context.
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, first.TraceParent)
	parts := strings.Split(first.TraceParent, "-")
	publishes := rc.named("publish")
	require.Len(t, publishes, 3)
	var pub *tracepb.Span
	for _, s := range publishes {
		if fmt.Sprintf("%x", s.SpanId) == parts[2] {
			pub = s
		}
	}
	require.NotNil(t, pub, "no publish span %s among %v", parts[2], publishes)
	require.Equal(t, parts[1], fmt.Sprintf("%x", pub.TraceId))
	require.Equal(t, tracepb.Span_SPAN_KIND_PRODUCER, pub.Kind)
	require.Equal(t, "telemetry.test", attr(pub, "herald.event_type"))
	require.Equal(t, "herald", attr(pub, "messaging.system"))
	// Its parent is the HTTP server span of the publish request, named by
	// the route pattern.
	parent := rc.byID(pub.ParentSpanId)
	require.NotNil(t, parent)
	require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, parent.Kind)
	require.Equal(t, "POST /api/v1beta/events/batch", parent.Name)

	// The pull's consumer span is linked to the producer span.
	var linked bool
	for _, s := range rc.named("receive pull") {
		require.Equal(t, tracepb.Span_SPAN_KIND_CONSUMER, s.Kind)
		for _, l := range s.Links {
			if bytes.Equal(l.SpanId, pub.SpanId) && bytes.Equal(l.TraceId, pub.TraceId) {
				linked = true
				require.Equal(t, "1", attr(s, "messaging.batch.message_count"))
			}
		}
	}
	require.True(t, linked, "no receive pull span links to the publish span")
	acks, nacks := rc.named("ack"), rc.named("nack")
	require.Len(t, acks, 1)
	require.Equal(t, "committed", attr(acks[0], "herald.outcome"))
	require.Len(t, nacks, 2)
	require.Equal(t, "requeued", attr(nacks[0], "herald.outcome"))

	// Store and broker calls are child spans of the operation that made
	// them: Herald's one span per lease-store operation (gocloud.dev's
	// span per docstore call is not recorded), and its broker spans, a
	// pull's under the store operation that holds the events it receives.
	rc.mu.Lock()
	all := append([]*tracepb.Span(nil), rc.spans...)
	rc.mu.Unlock()
	parentsOf := func(name string) map[string]int {
		out := map[string]int{}
		for _, s := range all {
			if s.Name != name {
				continue
			}
			if p := rc.byID(s.ParentSpanId); p != nil {
				out[p.Name]++
			}
		}
		return out
	}
	for _, s := range all {
		require.NotContains(t, s.Name, "ActionList", "gocloud.dev's docstore spans are not recorded")
	}
	sends := parentsOf("broker send")
	require.Equal(t, 3, sends["publish"], "every publish's one broker send, a batch's included, is a child of its publish span: %v", sends)
	require.Positive(t, parentsOf("store pull")["receive pull"], "a pull's store operation")
	require.Positive(t, parentsOf("broker receive")["store pull"], "a pull's broker receive, under its store operation")
	require.Positive(t, parentsOf("broker ack")["store pull"], "a pull acks what it leased at the broker")
	acked := parentsOf("store acknowledge")
	require.Positive(t, acked["ack"], "an acknowledgement's store operation: %v", acked)
	require.Positive(t, acked["nack"], "a nack's store operation: %v", acked)
	for _, s := range rc.named("store pull") {
		require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, s.Kind)
		require.Equal(t, "pull", attr(s, "herald.store.operation"))
	}

	// The Prometheus scrape counts what happened.
	res, err := http.Get("http://127.0.0.1:" + promPort + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	require.NoError(t, err)
	sample := func(prefix string, typ dto.MetricType, labels map[string]string) (float64, bool) {
		t.Helper()
		var total float64
		var found bool
		for name, f := range families {
			if !strings.HasPrefix(name, prefix) || f.GetType() != typ {
				continue
			}
			for _, m := range f.Metric {
				if hasLabels(m, labels) {
					switch typ {
					case dto.MetricType_COUNTER:
						total += m.GetCounter().GetValue()
					case dto.MetricType_GAUGE:
						total += m.GetGauge().GetValue()
					case dto.MetricType_HISTOGRAM:
						total += float64(m.GetHistogram().GetSampleCount())
					}
					found = true
				}
			}
		}
		return total, found
	}
	count := func(prefix string, labels map[string]string) float64 {
		t.Helper()
		v, found := sample(prefix, dto.MetricType_COUNTER, labels)
		require.True(t, found, "no counter %s%v in the scrape", prefix, labels)
		return v
	}
	gauge := func(prefix string, labels map[string]string) float64 {
		t.Helper()
		v, found := sample(prefix, dto.MetricType_GAUGE, labels)
		require.True(t, found, "no gauge %s%v in the scrape", prefix, labels)
		return v
	}
	require.Equal(t, 3.0, count("messaging_client_sent_messages", map[string]string{"herald_outcome": "ok"}))
	require.Equal(t, 3.0, count("messaging_client_consumed_messages", map[string]string{"messaging_operation_name": "pull"}))
	require.Equal(t, 1.0, count("herald_acknowledgements", map[string]string{"herald_outcome": "committed"}))
	require.Equal(t, 2.0, count("herald_acknowledgements", map[string]string{"herald_outcome": "requeued"}))
	require.Equal(t, 1.0, count("herald_dead_letters_triaged", map[string]string{"herald_action": "DISCARD", "herald_outcome": "DISCARDED"}))
	require.Equal(t, 1.0, gauge("herald_stream_sessions", map[string]string{"herald_transport": "sse", "herald_queue_kind": "non_durable"}))
	n, found := sample("herald_broker_operation_duration", dto.MetricType_HISTOGRAM, map[string]string{"messaging_operation_name": "send", "herald_broker": "mem"})
	require.True(t, found)
	require.Equal(t, 3.0, n, "one broker send per publish request")
	n, found = sample("herald_store_operation_duration", dto.MetricType_HISTOGRAM, map[string]string{"herald_store_operation": "acknowledge", "herald_outcome": "ok", "messaging_system": "herald"})
	require.True(t, found, "lease-store operation durations")
	require.Equal(t, 3.0, n, "one store acknowledgement per acknowledge request")
	_, found = sample("herald_store_operation_duration", dto.MetricType_HISTOGRAM, map[string]string{"herald_store_operation": "pull", "herald_outcome": "ok"})
	require.True(t, found)
	// Processing time of pull leases: from hand-out (recorded in the
	// lease) to each acknowledgement that settled one.
	n, found = sample("messaging_process_duration", dto.MetricType_HISTOGRAM, map[string]string{"herald_transport": "rest", "herald_outcome": "ack"})
	require.True(t, found, "processing time of an acknowledged pull lease")
	require.Equal(t, 1.0, n)
	n, found = sample("messaging_process_duration", dto.MetricType_HISTOGRAM, map[string]string{"herald_transport": "rest", "herald_outcome": "nack"})
	require.True(t, found, "processing time of a failed pull lease")
	require.Equal(t, 2.0, n)

	// The consumer gauges: the first destination holds its nacked event
	// (lag 1, waiting for redelivery, so none in flight); the second's
	// was dead-lettered.
	require.Equal(t, 1.0, gauge("herald_consumer_lag", map[string]string{"messaging_consumer_group_name": dest.ID}))
	require.Equal(t, 0.0, gauge("herald_consumer_in_flight", map[string]string{"messaging_consumer_group_name": dest.ID}))
	require.Equal(t, 0.0, gauge("herald_consumer_lag", map[string]string{"messaging_consumer_group_name": dest2.ID}))

	// The dead letter itself, counted by the lease store's write that
	// moved it.
	v, found := sample("herald_dead_letters_total", dto.MetricType_COUNTER, map[string]string{"herald_reason": "DELIVERY_LIMIT"})
	require.True(t, found, "herald_dead_letters_total{herald_reason=DELIVERY_LIMIT}")
	require.Equal(t, 1.0, v)
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.Label {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}
