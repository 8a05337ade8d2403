package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldevents/herald/herr"
)

// attrStoreOp names a lease-store operation (pull, pull_events,
// acknowledge, settle, reject, extend).
const attrStoreOp = "herald.store.operation"

// StoreOp is one lease-store operation in flight, from StartStore to End.
// The zero value (telemetry off) does nothing.
type StoreOp struct {
	span  trace.Span
	op    string
	start time.Time
}

// StartStore begins the lease-store operation op: a "store <op>" client
// span, the child of the operation that made it (its broker calls, a
// pull's receive, become its children), whose End records
// herald.store.operation.duration. It is Herald's one span per store
// operation, retries included, in place of gocloud.dev's span per
// docstore call (scopes gocloud.dev/… are not traced: see
// filteredProvider). The lease store calls it; off, it returns ctx and a
// zero StoreOp without allocating.
func StartStore(ctx context.Context, op string) (context.Context, StoreOp) {
	if !Enabled() {
		return ctx, StoreOp{}
	}
	ctx, span := tracer.Start(ctx, "store "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(attrStoreOp, op)))
	return ctx, StoreOp{span: span, op: op, start: time.Now()}
}

// End ends the operation with err: the span's status (and error.type)
// and its duration in herald.store.operation.duration (seconds), by
// operation and outcome (ok, or the error's code).
func (s StoreOp) End(ctx context.Context, err error) {
	if s.span == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = herr.CodeOf(err).String()
		s.span.SetAttributes(attribute.String(attrErrorType, outcome))
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, "store "+s.op+" failed")
	}
	s.span.End()
	ins.storeDuration.Record(ctx, time.Since(s.start).Seconds(), metric.WithAttributeSet(storeAttrs(s.op, outcome)))
}

// storeAttrSets caches the attribute set of each (operation, outcome)
// pair: both come from small fixed sets, and building, sorting and
// hashing a set per record was a measurable part of what telemetry costs
// a store call.
var storeAttrSets sync.Map // [2]string → attribute.Set

func storeAttrs(op, outcome string) attribute.Set {
	k := [2]string{op, outcome}
	if v, ok := storeAttrSets.Load(k); ok {
		return v.(attribute.Set)
	}
	set := attribute.NewSet(system, attribute.String(attrStoreOp, op), attribute.String(attrOutcome, outcome))
	storeAttrSets.Store(k, set)
	return set
}

// conflictAttrs is the one attribute set of herald.store.conflicts.
var conflictAttrs = attribute.NewSet(system)

// StoreConflict counts one retry of a lease-store operation after a fresh
// read (a conditional write lost a race, or what it read changed under
// it), in herald.store.conflicts. The lease store calls it; it does
// nothing when telemetry is off.
func StoreConflict(ctx context.Context) {
	if Enabled() {
		ins.storeConflicts.Add(ctx, 1, metric.WithAttributeSet(conflictAttrs))
	}
}
