// Package auth turns a bearer token into a Principal and answers what that
// principal may do.
//
// Every endpoint but GET /health requires `Authorization: Bearer <token>`
// (the notifications API, "Authentication"). Permissions are plain strings:
//
//	read:events                 pull and acknowledge durable consumers (the durable-consumer API)
//	manage:destinations         create, list, pause, resume and delete event destinations
//	                            (every consumer), and move the filters of any
//	                            non-durable queue (delivery.CheckQueueOwner)
//	run:jobs                    run the scheduled jobs over HTTP (POST /v1/jobs/{job})
//	publish:PATTERN             publish events whose type matches PATTERN: an exact
//	                            type, a prefix ending in "*" ("myapp.*"), or "*"
//	receive:PATTERN             be delivered events whose type matches PATTERN (same
//	                            patterns as publish); checked on every delivered event,
//	                            streams and durable-consumer pulls alike; a principal with no
//	                            receive right cannot open a non-durable stream
//	consume-durable-queues      stream from any durable queue (the notifications API)
//	create-durable-queues       create durable queues and update the filters of any one
//	delete-durable-queues       delete any durable queue
//	inspect-and-replay-all-dlq  list, replay and discard every dead letter
//	*                           everything
//
// The notifications API spells the last four with the service prefix
// "event-consumer-service:" (as in
// "event-consumer-service:inspect-and-replay-all-dlq"); both spellings are
// accepted.
//
// Tokens are static (StaticTokens: HERALD_TOKENS and the development
// token) or JWTs from an identity provider, whose scopes are these same
// permissions (package auth/jwtauth); Chain asks the static table first,
// then the JWT verifier. ParseBearer reads the Authorization header for
// both the REST and the gRPC middleware.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/heraldevents/herald/herr"
)

// Permissions Herald checks.
const (
	PermReadEvents         = "read:events"
	PermManageDestinations = "manage:destinations"
	PermRunJobs            = "run:jobs"
	PermPublishPrefix      = "publish:"
	// PermReceivePrefix + PATTERN lets a principal be delivered events
	// whose type matches PATTERN (see CanReceive).
	PermReceivePrefix = "receive:"
	// The durable-queue permissions of the notifications API ("Per-queue isolation is
	// not enforced"): deployment-wide, not per queue.
	PermConsumeDurableQueues = "consume-durable-queues"
	PermCreateDurableQueues  = "create-durable-queues" // also authorizes updating filters
	PermDeleteDurableQueues  = "delete-durable-queues"
	// PermInspectDeadLetters grants deployment-wide dead-letter visibility
	// and action (the notifications API, "ManageDeadLetteredEvents").
	PermInspectDeadLetters = "inspect-and-replay-all-dlq"
	PermAll                = "*"
	// ServicePrefix is the notifications API's spelling prefix of the consumer-service
	// permissions; "event-consumer-service:X" grants what X grants.
	ServicePrefix = "event-consumer-service:"
)

// ReservedPrincipalPrefix starts the ids of the principals Herald itself
// defines (DevPrincipalID). No other source of principals may produce one:
// package auth/jwtauth refuses a token whose principal claim starts with
// it, and HERALD_TOKENS refuses such an id, so a principal id names one
// caller whichever way it authenticated. That matters because the id is
// stamped on published events (principal_identity) and owns non-durable
// queues.
const ReservedPrincipalPrefix = "herald:"

// DevPrincipalID is the principal of the development token
// (HERALD_DEV_TOKEN): an id in the reserved namespace, so that a JWT
// whose sub is "dev" is not mistaken for the development token on
// published events or as the owner of a non-durable queue.
const DevPrincipalID = ReservedPrincipalPrefix + "dev"

// Reserved reports whether id is in Herald's reserved namespace
// (ReservedPrincipalPrefix).
func Reserved(id string) bool { return strings.HasPrefix(id, ReservedPrincipalPrefix) }

// Principal is an authenticated caller.
type Principal struct {
	// ID names the caller; it is stamped on published events as
	// principal_identity. It is never the token.
	ID          string
	Permissions []string
}

// Can reports whether p holds perm (or "*"). A permission held as
// ServicePrefix+perm counts as perm.
func (p *Principal) Can(perm string) bool {
	for _, have := range p.Permissions {
		if have == PermAll || have == perm || (strings.HasPrefix(have, ServicePrefix) && have[len(ServicePrefix):] == perm) {
			return true
		}
	}
	return false
}

// CanPublish reports whether p may publish events of eventType.
func (p *Principal) CanPublish(eventType string) bool {
	return p.matches(PermPublishPrefix, eventType)
}

// CanReceive reports whether p may be delivered events of eventType: it
// holds "*" or a receive:PATTERN that matches (an exact type, a prefix
// ending in "*", or "*").
func (p *Principal) CanReceive(eventType string) bool {
	return p.matches(PermReceivePrefix, eventType)
}

// CanReceiveAll reports whether p may receive every event type: it holds
// "*" or "receive:*". A pull then need not look at each event's type.
func (p *Principal) CanReceiveAll() bool {
	for _, have := range p.Permissions {
		if have == PermAll || have == PermReceivePrefix+"*" {
			return true
		}
	}
	return false
}

// CanReceiveAny reports whether p holds any receive right at all.
func (p *Principal) CanReceiveAny() bool {
	for _, have := range p.Permissions {
		if have == PermAll {
			return true
		}
		if pattern, ok := strings.CutPrefix(have, PermReceivePrefix); ok && pattern != "" {
			return true
		}
	}
	return false
}

// matches reports whether p holds "*" or prefix+PATTERN with PATTERN
// matching eventType.
func (p *Principal) matches(prefix, eventType string) bool {
	for _, have := range p.Permissions {
		if have == PermAll {
			return true
		}
		pattern, ok := strings.CutPrefix(have, prefix)
		if !ok {
			continue
		}
		if pattern == "*" || pattern == eventType {
			return true
		}
		if head, ok := strings.CutSuffix(pattern, "*"); ok && strings.HasPrefix(eventType, head) {
			return true
		}
	}
	return false
}

// Require returns herr.PermissionDenied unless p holds perm.
func (p *Principal) Require(perm string) error {
	if p.Can(perm) {
		return nil
	}
	return herr.New(herr.PermissionDenied, "permission %q is required", perm)
}

// Authenticator resolves a bearer token. It returns herr.Unauthenticated for
// an unknown token; its errors never contain the token.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// StaticTokens is an Authenticator over a fixed token → principal table,
// compared in constant time. The development token (HERALD_DEV_TOKEN) is
// one entry of it with every permission.
type StaticTokens map[string]*Principal

// DevToken returns the development token's table: token grants
// everything, as principal DevPrincipalID. An empty token gives an empty
// table (no development token).
func DevToken(token string) StaticTokens {
	if token == "" {
		return StaticTokens{}
	}
	return StaticTokens{token: {ID: DevPrincipalID, Permissions: []string{PermAll}}}
}

// Authenticate implements Authenticator.
func (t StaticTokens) Authenticate(_ context.Context, token string) (*Principal, error) {
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		for known, p := range t {
			ks := sha256.Sum256([]byte(known))
			if subtle.ConstantTimeCompare(sum[:], ks[:]) == 1 {
				return p, nil
			}
		}
	}
	return nil, herr.New(herr.Unauthenticated, "the bearer token is missing, invalid or expired")
}

// Known reports whether perm is a permission Herald checks: one of the
// names above (the consumer-service ones also with ServicePrefix),
// publish:PATTERN or receive:PATTERN with a non-empty PATTERN, or "*".
func Known(perm string) bool {
	switch perm {
	case PermAll, PermReadEvents, PermManageDestinations, PermRunJobs:
		return true
	}
	switch strings.TrimPrefix(perm, ServicePrefix) {
	case PermConsumeDurableQueues, PermCreateDurableQueues, PermDeleteDurableQueues, PermInspectDeadLetters:
		return true
	}
	for _, prefix := range []string{PermPublishPrefix, PermReceivePrefix} {
		if pattern, ok := strings.CutPrefix(perm, prefix); ok && pattern != "" {
			return true
		}
	}
	return false
}

// Chain is an Authenticator that asks Static first and then, when the
// token is not one of the static tokens, JWT (nil for none). Static
// tokens (HERALD_TOKENS, the development token) so keep working beside an
// identity provider, for service accounts and local use.
type Chain struct {
	Static StaticTokens
	JWT    Authenticator
}

// Authenticate implements Authenticator: a static token's principal, else
// JWT's answer (herr.Unauthenticated or herr.Unavailable), else
// herr.Unauthenticated.
func (c Chain) Authenticate(ctx context.Context, token string) (*Principal, error) {
	p, err := c.Static.Authenticate(ctx, token)
	if err == nil || c.JWT == nil {
		return p, err
	}
	return c.JWT.Authenticate(ctx, token)
}

// ParseBearer returns the token of an Authorization header value that
// uses the Bearer scheme (RFC 6750, section 2.1). The scheme name is
// case-insensitive (RFC 9110, section 11.1) and is followed by one or
// more spaces or tabs; surrounding whitespace is dropped. ok is false for
// another scheme or an empty token.
func ParseBearer(header string) (token string, ok bool) {
	const scheme = "Bearer"
	h := strings.TrimLeft(header, " \t")
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) || (h[len(scheme)] != ' ' && h[len(scheme)] != '\t') {
		return "", false
	}
	token = strings.Trim(h[len(scheme):], " \t")
	return token, token != ""
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal in ctx, or herr.Unauthenticated.
func FromContext(ctx context.Context) (*Principal, error) {
	if p, ok := ctx.Value(ctxKey{}).(*Principal); ok && p != nil {
		return p, nil
	}
	return nil, herr.New(herr.Unauthenticated, "the request is not authenticated")
}
