package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/heraldevents/herald/herr"
)

// attrStoreOp names a lease-store operation (pull, pull_events,
// acknowledge, settle, reject).
const attrStoreOp = "herald.store.operation"

// StoreOperation records one lease-store operation that began at start
// and ended with err in herald.store.operation.duration (seconds), by
// operation and outcome (ok, or the error's code). The lease store calls
// it; it does nothing when telemetry is off.
func StoreOperation(ctx context.Context, op string, start time.Time, err error) {
	if !Enabled() {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = herr.CodeOf(err).String()
	}
	ins.storeDuration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
		attribute.String(attrStoreOp, op), attribute.String(attrOutcome, outcome)))
}

// StoreConflict counts one retry of a lease-store operation after a fresh
// read (a conditional write lost a race, or what it read changed under
// it), in herald.store.conflicts. The lease store calls it; it does
// nothing when telemetry is off.
func StoreConflict(ctx context.Context) {
	if Enabled() {
		ins.storeConflicts.Add(ctx, 1)
	}
}
