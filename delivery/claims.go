package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
)

// The claim-check. A broker that states a size limit
// (pubsubx.Broker.MaxMessageBytes; Amazon
// SNS/SQS: 260,096 bytes) cannot carry Herald's largest event, a 256 KiB
// message in its CloudEvents envelope. Publish stores an event whose
// encoding passes the broker's limit in the lease store first
// (leasestore.Store.PutClaim, keyed by the event id), then sends a small
// reference in its place: the body {"herald_claim":"<event id>"} with the
// event's usual attributes (event type, resource id, event id, so broker
// filters work unchanged) and pubsubx.AttrClaim set to the id
// (pubsubx.MakeReference: the reference's shape is the broker seam's). If the
// store write fails the event is not published (nothing is sent).
//
// The receivers (pulls of durable consumers and stream sessions) check the
// filters on the attributes, then replace each reference by the stored
// event (leasestore.Store.GetClaim) before the store leases it, so
// consumers always see the event byte for byte as it was encoded. A
// reference whose claim is gone (reaped after HERALD_CLAIM_RETENTION, or
// deleted by hand) cannot be delivered: it is logged with its event id and
// subscription (never a body), counted (Service.MissingClaims), and acked
// at the broker so that it does not come back.
//
// Claims are not deleted on delivery (every subscription that holds the
// reference reads the same claim); the reap-idle-queues job deletes those
// older than the retention (Service.ReapClaims). Cost: one store write per
// large event at publish, one store read per delivery of it.

// DefaultClaimRetention is how long a claim is kept before the
// reap-idle-queues job deletes it: 336 hours (14 days), Amazon SQS's
// longest message retention, so no reference a queue can still hold
// outlives its claim.
const DefaultClaimRetention = 14 * 24 * time.Hour

// needsClaim reports whether body is too big for the broker.
func (s *Service) needsClaim(body []byte) bool {
	return s.cfg.Broker.NeedsClaim(body)
}

// putClaim stores body as claim id for Publish. Errors are herr.Unavailable
// (or Canceled, DeadlineExceeded, or InvalidArgument for a body over
// leasestore.MaxClaimBytes): the event must not be published.
func (s *Service) putClaim(ctx context.Context, id string, body []byte) error {
	if s.cfg.Store == nil {
		return herr.New(herr.Unavailable, "the event is %d bytes, more than the message broker carries, and this function has no lease store for the claim-check", len(body))
	}
	if err := s.cfg.Store.PutClaim(ctx, id, body); err != nil {
		code := herr.CodeOf(err)
		if code != herr.Canceled && code != herr.DeadlineExceeded && code != herr.InvalidArgument {
			code = herr.Unavailable
		}
		return herr.Wrap(code, err, "Unable to store the event for the message broker (claim-check)")
	}
	return nil
}

// errMissingClaim marks a reference whose claim is gone.
var errMissingClaim = errors.New("claim is gone")

// resolve returns the event m carries: its body, or for a claim-check
// reference the stored event. errMissingClaim means the claim is gone
// (logged and counted here); other errors are the store's.
func (s *Service) resolve(ctx context.Context, sub string, m *pubsubx.Message) ([]byte, error) {
	id := pubsubx.ClaimOf(m)
	if id == "" {
		return m.Body, nil
	}
	if s.cfg.Store == nil {
		return nil, herr.New(herr.Internal, "a claim-check reference arrived and there is no lease store to resolve it")
	}
	body, err := s.cfg.Store.GetClaim(ctx, id)
	if err == nil {
		return body, nil
	}
	if herr.CodeOf(err) != herr.NotFound {
		return nil, err
	}
	s.missingClaims.Add(1)
	s.cfg.Logger.WarnContext(ctx, "claim-check reference without its claim: the event is dropped (acked at the broker)",
		"event_id", m.Metadata[pubsubx.AttrEventID], "claim", id, "event_type", m.EventType(), "subscription", sub)
	return nil, errMissingClaim
}

// MissingClaims counts the claim-check references this Service dropped
// because their claim was gone (see the claim-check above), since New.
func (s *Service) MissingClaims() int64 { return s.missingClaims.Load() }

// reapClaims deletes the claims older than Config.ClaimRetention and
// returns how many (see leasestore.Store.ReapClaims); ReapIdleQueues
// calls it.
func (s *Service) reapClaims(ctx context.Context) (int, error) {
	return s.cfg.Store.ReapClaims(ctx, s.cfg.ClaimRetention)
}

// resolveAll turns the received messages that passed the filters into
// Incoming events, resolving claim-check references. References whose
// claim is gone are appended to skip (the caller acks them at the
// broker). On a store error it nacks msgs at the broker (best effort) and
// returns the error.
func (s *Service) resolveAll(ctx context.Context, sub string, msgs, skip []*pubsubx.Message) ([]leasestore.Incoming, []*pubsubx.Message, error) {
	var out []leasestore.Incoming
	for _, m := range msgs {
		body, err := s.resolve(ctx, sub, m)
		switch {
		case err == nil:
			out = append(out, leasestore.Incoming{Body: body, Handle: m})
		case errors.Is(err, errMissingClaim):
			skip = append(skip, m)
		default:
			all := append(append([]*pubsubx.Message(nil), msgs...), skip...)
			_ = s.cfg.Broker.Nack(ctx, sub, all)
			return nil, nil, herr.Wrap(herr.Unavailable, err, "the lease store is unavailable (reading a claim-check event); retry with backoff")
		}
	}
	return out, skip, nil
}
