package delivery

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/strictjson"
	"github.com/heraldevents/herald/leasestore"
)

// Defaults of a retry_policy whose members are absent (Google Pub/Sub's).
const (
	DefaultMinimumBackoff = 10 * time.Second
	DefaultMaximumBackoff = 600 * time.Second
)

// RetryPolicy is the REST shape of a consumer's retry policy, in whole
// seconds: the n-th failed delivery waits minimum_backoff·2^(n-1), at most
// maximum_backoff (both 0–600; absent: 10 and 600, as Google Pub/Sub's).
type RetryPolicy struct {
	MinimumBackoff *int64 `json:"minimum_backoff,omitempty"`
	MaximumBackoff *int64 `json:"maximum_backoff,omitempty"`
}

// DeadLetterPolicy is the REST shape of a consumer's dead-letter policy:
// its events go to the dead-letter queue instead of a delivery past
// max_delivery_attempts (1–1,000, required).
type DeadLetterPolicy struct {
	MaxDeliveryAttempts *int64 `json:"max_delivery_attempts,omitempty"`
}

// PolicyFields are the delivery-policy members of a create or update body
// (embed it in the request struct). Each is absent (unchanged, or the
// default at creation), null (removed: the deployment's default) or a
// value: retry_policy a RetryPolicy, dead_letter_policy a
// DeadLetterPolicy, ack_timeout whole seconds (durable queues only:
// 1–43,200, the time an unsettled stream event stays with its stream).
type PolicyFields struct {
	RetryPolicy      jsontext.Value `json:"retry_policy,omitzero"`
	DeadLetterPolicy jsontext.Value `json:"dead_letter_policy,omitzero"`
	AckTimeout       jsontext.Value `json:"ack_timeout,omitzero"`
}

// Any reports whether f names any policy.
func (f PolicyFields) Any() bool {
	return len(f.RetryPolicy) > 0 || len(f.DeadLetterPolicy) > 0 || len(f.AckTimeout) > 0
}

// Apply returns base with f's changes for a consumer of consumerType (a
// leasestore.Type* constant): ack_timeout is allowed only for
// leasestore.TypeDurableQueue, herr.Malformed elsewhere. A member of
// the wrong shape is herr.Malformed naming it; a value out of range is
// herr.InvalidArgument naming it.
func (f PolicyFields) Apply(base leasestore.Policies, consumerType string) (leasestore.Policies, error) {
	out := base
	if len(f.RetryPolicy) > 0 {
		out.RetryPolicy = nil
		if !isNull(f.RetryPolicy) {
			var rp RetryPolicy
			if err := strictjson.Unmarshal(f.RetryPolicy, &rp); err != nil {
				return base, herr.New(herr.Malformed, "retry_policy must be an object with minimum_backoff and maximum_backoff in whole seconds")
			}
			p := &leasestore.RetryPolicy{MinimumBackoff: DefaultMinimumBackoff, MaximumBackoff: DefaultMaximumBackoff}
			if rp.MinimumBackoff != nil {
				p.MinimumBackoff = seconds(*rp.MinimumBackoff)
			}
			if rp.MaximumBackoff != nil {
				p.MaximumBackoff = seconds(*rp.MaximumBackoff)
			}
			if p.MaximumBackoff < p.MinimumBackoff && rp.MaximumBackoff == nil {
				p.MaximumBackoff = p.MinimumBackoff // only the minimum given: the default maximum cannot be below it
			}
			out.RetryPolicy = p
		}
	}
	if len(f.DeadLetterPolicy) > 0 {
		out.MaxDeliveryAttempts = 0
		if !isNull(f.DeadLetterPolicy) {
			var dp DeadLetterPolicy
			if err := strictjson.Unmarshal(f.DeadLetterPolicy, &dp); err != nil {
				return base, herr.New(herr.Malformed, "dead_letter_policy must be an object with max_delivery_attempts")
			}
			if dp.MaxDeliveryAttempts == nil || *dp.MaxDeliveryAttempts < 1 || *dp.MaxDeliveryAttempts > leasestore.MaxDeliveryAttempts {
				return base, herr.New(herr.InvalidArgument, "dead_letter_policy.max_delivery_attempts is required and must be between 1 and %d", leasestore.MaxDeliveryAttempts)
			}
			out.MaxDeliveryAttempts = int(*dp.MaxDeliveryAttempts)
		}
	}
	if len(f.AckTimeout) > 0 {
		if consumerType != leasestore.TypeDurableQueue {
			return base, herr.New(herr.Malformed, "ack_timeout is only for durable queues")
		}
		out.AckTimeout = 0
		if !isNull(f.AckTimeout) {
			var s int64
			if err := strictjson.Unmarshal(f.AckTimeout, &s); err != nil {
				return base, herr.New(herr.Malformed, "ack_timeout must be a whole number of seconds")
			}
			if s < 1 || s > int64(leasestore.MaxLeaseLife/time.Second) {
				return base, herr.New(herr.InvalidArgument, "ack_timeout must be between 1 and %d seconds", int64(leasestore.MaxLeaseLife/time.Second))
			}
			out.AckTimeout = seconds(s)
		}
	}
	return out, out.Validate()
}

// seconds converts whole seconds, clamping values no range admits (so
// that the multiplication cannot overflow into a valid one).
func seconds(s int64) time.Duration {
	const most = int64(1 << 40)
	return time.Duration(max(min(s, most), -most)) * time.Second
}

func isNull(v jsontext.Value) bool { return v.Kind() == 'n' }

// RetryPolicyView is a stored retry policy as the REST APIs answer it.
type RetryPolicyView struct {
	MinimumBackoff int64 `json:"minimum_backoff"`
	MaximumBackoff int64 `json:"maximum_backoff"`
}

// DeadLetterPolicyView is a stored dead-letter policy as the REST APIs
// answer it.
type DeadLetterPolicyView struct {
	MaxDeliveryAttempts int `json:"max_delivery_attempts"`
}

// PolicyViews returns c's policies in their REST shapes (nil: not set).
func PolicyViews(c *leasestore.Consumer) (*RetryPolicyView, *DeadLetterPolicyView) {
	var rp *RetryPolicyView
	if p := c.RetryPolicy; p != nil {
		rp = &RetryPolicyView{MinimumBackoff: int64(p.MinimumBackoff / time.Second), MaximumBackoff: int64(p.MaximumBackoff / time.Second)}
	}
	var dp *DeadLetterPolicyView
	if c.MaxDeliveryAttempts > 0 {
		dp = &DeadLetterPolicyView{MaxDeliveryAttempts: c.MaxDeliveryAttempts}
	}
	return rp, dp
}

// UpdateDestination changes the delivery policies of consumer id (PATCH
// /v1/event-destinations/{id}): retry_policy and dead_letter_policy, on
// any consumer type; ack_timeout is refused here (PATCH
// /api/v1beta/queues/durable sets it). It needs manage:destinations.
// Errors: herr.PermissionDenied, herr.Malformed or herr.InvalidArgument
// for the body, herr.NotFound for an unknown id.
func (s *Service) UpdateDestination(ctx context.Context, p *auth.Principal, id string, f PolicyFields) (*leasestore.Consumer, error) {
	if err := p.Require(auth.PermManageDestinations); err != nil {
		return nil, err
	}
	if err := CheckText("the event destination id", id); err != nil {
		return nil, err
	}
	return s.setPolicies(ctx, id, f, leasestore.TypeDurableConsumer)
}

// UpdateQueuePolicies changes durable queue id's policies (the policy
// members of PATCH /api/v1beta/queues/durable). It needs
// create-durable-queues, as a filter update. Errors as UpdateDestination.
func (s *Service) UpdateQueuePolicies(ctx context.Context, p *auth.Principal, id string, f PolicyFields) (*leasestore.Consumer, error) {
	if err := p.Require(auth.PermCreateDurableQueues); err != nil {
		return nil, err
	}
	if err := ValidateQueueID(id); err != nil {
		return nil, err
	}
	if _, err := f.Apply(leasestore.Policies{}, leasestore.TypeDurableQueue); err != nil {
		return nil, err // before any backend call
	}
	if _, err := s.getQueue(ctx, id); err != nil {
		return nil, err
	}
	return s.setPolicies(ctx, id, f, leasestore.TypeDurableQueue)
}

func (s *Service) setPolicies(ctx context.Context, id string, f PolicyFields, consumerType string) (*leasestore.Consumer, error) {
	if _, err := f.Apply(leasestore.Policies{}, consumerType); err != nil {
		return nil, err // before any backend call
	}
	// Applied to the policies the store's conditional write reads, so
	// that concurrent PATCHes of different members both land.
	return s.cfg.Store.UpdatePolicies(ctx, id, func(cur leasestore.Policies) (leasestore.Policies, error) {
		return f.Apply(cur, consumerType)
	})
}

// ackTimeout returns the visibility of c's stream leases: its own
// ack_timeout, else the deployment's.
func (s *Service) ackTimeout(c *leasestore.Consumer) time.Duration {
	if c != nil && c.AckTimeout > 0 {
		return c.AckTimeout
	}
	return s.cfg.Streams.AckTimeout
}
