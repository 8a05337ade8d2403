// Package jobs runs Herald's scheduled jobs, which the local adapter, a
// Lambda schedule and Cloud Scheduler all call the same way:
//
//	POST /v1/jobs/lease-expiry      → 200 {"job":"lease-expiry","consumers":3,"requeued_leases":1,"requeued_events":20,"failed":0}
//	POST /v1/jobs/push-webhooks     → 200 {"job":"push-webhooks","consumers":2,"requeued_leases":0,"requeued_events":0,"failed":0,"delivered":14,"delivered_events":14,"failed_deliveries":1,"disabled_webhooks":0,"open_circuits":0}
//	POST /v1/jobs/reap-idle-queues  → 200 {"job":"reap-idle-queues","consumers":0,"requeued_leases":0,"requeued_events":0,"failed":0,"reaped_queues":2,"reaped_connections":0,"reaped_claims":1,"taken_in":8,"maxlen_dead_letters":3}
//
// reap-idle-queues deletes the non-durable queues whose last stream left
// more than HERALD_RECONNECT_GRACE ago and the durable queues without an
// attached consumer for HERALD_QUEUE_IDLE_WINDOW, with their broker
// subscriptions (the notifications API, "Durable Queue Lifetime"). Then
// it takes the broker backlog of every other queue with a maximum length
// (HERALD_QUEUE_MAX_LENGTH) and no attached consumer into the queue
// (taken_in), and dead-letters the oldest events past the maximum with
// reason MAXLEN (maxlen_dead_letters), so that a queue nobody reads holds
// at most its maximum length (see delivery.Service.ReapIdleQueues); failed
// counts subscriptions it could not delete and queues whose backlog it
// could not take in. It also removes the connection
// records of the API Gateway WebSocket function that are older than 2
// hours (Options.CloseStaleConnections, which the Lambda bootstrap sets to
// wslambda.CloseStale; reaped_connections), ending their sessions,
// and the claim-check claims (events too big for the broker, kept in the
// lease store) older than HERALD_CLAIM_RETENTION (reaped_claims; see
// package delivery).
// The local adapter runs it every HERALD_REAP_INTERVAL; the clouds on a
// schedule.
//
// push-webhooks POSTs the due events of every webhook destination
// (delivery.Service.PushWebhooks) until each is caught up or the request
// ends: consumers counts the destinations pushed to, delivered the
// deliveries answered 2xx (delivered_events their events),
// failed_deliveries the attempts that failed and wait for their retry,
// disabled_webhooks the destinations disabled by a 410 Gone,
// open_circuits those skipped or stopped by an open circuit breaker,
// failed the destinations the run could not serve. The clouds run it every minute
// and the local adapter continuously (docs/webhooks.md).
//
// The HTTP form needs a token with the run:jobs permission (Cloud
// Scheduler sends one). On AWS, EventBridge Scheduler invokes the jobs
// Lambda directly with {"job":"lease-expiry"}; IAM decides who may invoke
// it, and the job runs as SchedulerPrincipal.
//
// An unknown job is 404; a token without run:jobs 403. A run that could not
// sweep every consumer answers 503 (the consumers it missed are logged); the
// job is idempotent, so a retry is safe.
package jobs

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// LeaseExpiry names the lease-expiry sweep (delivery.Service.ExpireLeases).
const LeaseExpiry = "lease-expiry"

// ReapIdleQueues names the idle-queue reaper
// (delivery.Service.ReapIdleQueues).
const ReapIdleQueues = "reap-idle-queues"

// PushWebhooks names the webhook push (delivery.Service.PushWebhooks).
const PushWebhooks = "push-webhooks"

// PushBudget is how long one push-webhooks run starts new deliveries:
// the clouds run it every minute, and a run must end (its last
// deliveries, up to a destination's 60-second maximum timeout, included)
// inside the jobs function's 60-second Lambda timeout only when no
// delivery hangs; a delivery cut off by the platform is retried after its
// lease expires.
const PushBudget = 40 * time.Second

// Names lists every job, for documentation and schedules.
func Names() []string { return []string{LeaseExpiry, ReapIdleQueues, PushWebhooks} }

// SchedulerPrincipal is who a job runs as when a platform scheduler
// invokes the jobs function directly, without a token (a Lambda on an
// EventBridge schedule): the platform's IAM has authorized the call.
var SchedulerPrincipal = &auth.Principal{ID: "scheduler", Permissions: []string{auth.PermRunJobs}}

// Result is the answer of one job run.
type Result struct {
	Job            string `json:"job"`
	Consumers      int    `json:"consumers"`
	RequeuedLeases int    `json:"requeued_leases"`
	RequeuedEvents int64  `json:"requeued_events"`
	Failed         int    `json:"failed"`
	// ReapedQueues is set by reap-idle-queues only: the queues it deleted.
	ReapedQueues *int `json:"reaped_queues,omitempty"`
	// ReapedConnections is set by reap-idle-queues only: the stale
	// WebSocket connection records it removed.
	ReapedConnections *int `json:"reaped_connections,omitempty"`
	// ReapedClaims is set by reap-idle-queues only: the claim-check claims
	// older than HERALD_CLAIM_RETENTION it deleted.
	ReapedClaims *int `json:"reaped_claims,omitempty"`
	// TakenIn is set by reap-idle-queues only: the events it moved from
	// the broker into queues with a maximum length and no attached
	// consumer.
	TakenIn *int `json:"taken_in,omitempty"`
	// MaxLenDeadLetters is set by reap-idle-queues only: the events it
	// dead-lettered with reason MAXLEN, the oldest past a queue's maximum
	// length.
	MaxLenDeadLetters *int `json:"maxlen_dead_letters,omitempty"`
	// Delivered, DeliveredEvents, FailedDeliveries, DisabledWebhooks and
	// OpenCircuits are set by push-webhooks only (delivery.PushReport).
	Delivered        *int `json:"delivered,omitempty"`
	DeliveredEvents  *int `json:"delivered_events,omitempty"`
	FailedDeliveries *int `json:"failed_deliveries,omitempty"`
	DisabledWebhooks *int `json:"disabled_webhooks,omitempty"`
	OpenCircuits     *int `json:"open_circuits,omitempty"`
}

// ConnectionCloser removes the connection records of the API Gateway
// WebSocket function that are stale, ending their sessions, as p (who
// needs run:jobs), and returns how many it removed.
type ConnectionCloser func(ctx context.Context, svc *delivery.Service, p *auth.Principal) (int, error)

// Options adjust what the jobs do beyond the core service.
type Options struct {
	// CloseStaleConnections is what reap-idle-queues runs for the API
	// Gateway WebSocket function's connection records: the Lambda
	// bootstrap sets it to wslambda.CloseStale, the one reader of those
	// records. nil reaps none (reaped_connections 0): only that function
	// writes them, so no other build has any. It is a function here, not
	// an import, so that a build without the API Gateway WebSocket
	// function (Cloud Run) links no AWS Lambda package.
	CloseStaleConnections ConnectionCloser
}

// Run runs job name as p. An unknown name is herr.NotFound. On a partial
// failure it returns the result so far and the error.
func Run(ctx context.Context, svc *delivery.Service, p *auth.Principal, name string, o Options) (*Result, error) {
	switch name {
	case LeaseExpiry:
		rep, err := svc.ExpireLeases(ctx, p)
		if rep == nil {
			return nil, err
		}
		telemetry.LeasesExpired(ctx, rep.Events)
		return &Result{
			Job: name, Consumers: rep.Consumers, RequeuedLeases: rep.Leases,
			RequeuedEvents: rep.Events, Failed: rep.Failed,
		}, err
	case ReapIdleQueues:
		rep, err := svc.ReapIdleQueues(ctx, p)
		if rep == nil {
			return nil, err
		}
		var (
			conns int
			cerr  error
		)
		if o.CloseStaleConnections != nil {
			conns, cerr = o.CloseStaleConnections(ctx, svc, p)
		}
		return &Result{
			Job: name, Failed: rep.Failed + rep.Intake.Failed, ReapedQueues: &rep.Queues, ReapedConnections: &conns, ReapedClaims: &rep.Claims,
			TakenIn: &rep.Intake.TakenIn, MaxLenDeadLetters: &rep.Intake.Evicted,
		}, errors.Join(err, cerr)
	case PushWebhooks:
		rep, err := svc.PushWebhooks(ctx, p, PushBudget)
		if rep == nil {
			return nil, err
		}
		return &Result{
			Job: name, Consumers: rep.Destinations, Failed: rep.Errors,
			Delivered: &rep.Delivered, DeliveredEvents: &rep.Events, FailedDeliveries: &rep.Failed, DisabledWebhooks: &rep.Disabled,
			OpenCircuits: &rep.Open,
		}, err
	default:
		return nil, herr.New(herr.NotFound, "no such job %q (known: %s)", name, strings.Join(Names(), ", "))
	}
}

// Handler serves POST /v1/jobs/{job}.
type Handler struct {
	Service *delivery.Service
	Options Options
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.Principal(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	res, err := Run(r.Context(), h.Service, p, r.PathValue("job"), h.Options)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}
