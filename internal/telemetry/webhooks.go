package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Webhook metrics (docs/telemetry.md): one series per webhook
// destination, named by its id as the consumer gauges name consumers
// (messaging.consumer.group.name), up to maxWebhookSeries destinations a
// process has seen; the rest are summed under "_other".

// Outcomes of a webhook delivery attempt, the herald.outcome attribute.
const (
	WebhookOK     = "ok"     // answered 2xx
	WebhookFailed = "failed" // any other answer, a timeout, a refused or failed connection
	WebhookGone   = "gone"   // answered 410 Gone: the destination is disabled
)

// maxWebhookSeries bounds the destinations reported by id.
const maxWebhookSeries = 1000

// webhookNames remembers the destinations given a series of their own.
var webhookNames = struct {
	sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

// webhookAttr is destination's attribute: its id while fewer than
// maxWebhookSeries others have one, else "_other".
func webhookAttr(destination string) attribute.KeyValue {
	webhookNames.Lock()
	defer webhookNames.Unlock()
	if !webhookNames.seen[destination] {
		if len(webhookNames.seen) >= maxWebhookSeries {
			return attribute.String(attrConsumer, "_other")
		}
		webhookNames.seen[destination] = true
	}
	return attribute.String(attrConsumer, destination)
}

// WebhookAttempted records one delivery attempt to webhook destination:
// herald.webhook.attempts by outcome (WebhookOK, WebhookFailed,
// WebhookGone; the successes are the WebhookOK ones) and its latency in
// herald.webhook.duration.
func WebhookAttempted(ctx context.Context, destination, outcome string, latency time.Duration) {
	if !Enabled() {
		return
	}
	opts := metric.WithAttributes(system, webhookAttr(destination), attribute.String(attrOutcome, outcome))
	ins.webhookAttempts.Add(ctx, 1, opts)
	ins.webhookDuration.Record(ctx, latency.Seconds(), opts)
}

// WebhookConsecutiveFailures records webhook destination's count of
// consecutive failed attempts (its circuit breaker's), as last read or
// written by this process.
func WebhookConsecutiveFailures(ctx context.Context, destination string, n int) {
	if !Enabled() {
		return
	}
	ins.webhookFailures.Record(ctx, int64(n), metric.WithAttributes(system, webhookAttr(destination)))
}
