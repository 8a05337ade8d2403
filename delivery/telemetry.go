package delivery

import (
	"context"

	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
)

// This file records what package internal/telemetry measures of
// deliveries and settlements (docs/telemetry.md).

// telemetryName is the bounded name of a stream kind in spans and metrics.
func (k StreamKind) telemetryName() string {
	if k == Durable {
		return "durable"
	}
	return "non_durable"
}

// redelivered returns how many of l's events were delivered before.
func redelivered(l *leasestore.Lease) int {
	if l.Attempt > 1 {
		return len(l.Events)
	}
	return 0
}

// streamDelivered records a consumer span for ds, handed to a stream
// session, linked to each event's producer span.
func streamDelivered(ctx context.Context, kind StreamKind, ds []Delivery) {
	if !telemetry.Enabled() {
		return
	}
	ctx, op := telemetry.StartReceive(ctx, "stream")
	op.SetQueueKind(kind.telemetryName())
	bodies := make([][]byte, len(ds))
	again := 0
	for i, d := range ds {
		bodies[i] = d.Body
		if d.DeliveryCount > 1 {
			again++
		}
	}
	op.Delivered(ctx, bodies, again)
	op.End(ctx, nil)
}

// startSettle starts the span of a stream settlement; the returned func
// ends it with the report's counts as acknowledgement outcomes.
func startSettle(ctx context.Context) (context.Context, func(*SettleReport, error)) {
	if !telemetry.Enabled() {
		return ctx, func(*SettleReport, error) {}
	}
	ctx, op := telemetry.StartSettle(ctx, "settle")
	return ctx, func(rep *SettleReport, err error) {
		if err != nil {
			op.Acknowledged(ctx, "error", rep.Acked+rep.Nacked+rep.Skipped)
		} else {
			op.Acknowledged(ctx, string(leasestore.OutcomeCommitted), rep.Acked)
			op.Acknowledged(ctx, string(leasestore.OutcomeRequeued), rep.Nacked)
			op.Acknowledged(ctx, string(leasestore.OutcomeStale), rep.Skipped)
		}
		op.End(ctx, err)
	}
}

// webhookAttempted records attempt out to webhook destination id.
func webhookAttempted(ctx context.Context, id string, out attemptOutcome) {
	outcome := telemetry.WebhookFailed
	switch {
	case out.ok:
		outcome = telemetry.WebhookOK
	case out.gone:
		outcome = telemetry.WebhookGone
	}
	telemetry.WebhookAttempted(ctx, id, outcome, out.latency)
}
