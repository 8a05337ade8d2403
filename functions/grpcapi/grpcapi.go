// Package grpcapi serves the notifications API's gRPC API with connectrpc.com/connect:
// EventPublishingService and EventConsumerService over a
// delivery.Service, plus gRPC health checking
// (grpc.health.v1.Health) and server reflection (v1 and v1alpha). One
// handler speaks the gRPC, gRPC-Web and Connect protocols, so the same
// port that serves REST serves gRPC too: over HTTP/2 (cleartext "h2c"
// locally, TLS behind a load balancer) for gRPC, and over HTTP/1.1 as well
// for Connect and gRPC-Web.
//
// Package router mounts what Mounts returns next to the REST routes.
//
// # Authentication
//
// Every RPC of the notifications API's services needs `authorization: Bearer <token>`
// metadata (an HTTP header). Authenticate checks it before the request body
// is read, so a caller without a valid token cannot make the server
// decode a large message; it answers UNAUTHENTICATED in the caller's
// protocol and never repeats the token. Health checking and reflection are
// public, as GET /health is: they reveal only the published schema.
//
// # Errors
//
// Code maps herr codes to gRPC codes. It is the gRPC counterpart of
// httpx.Status and the only such mapping; Error applies it and keeps the
// cause out of the status message (see package herr).
//
// # Consuming
//
// EventConsumerService (type Consumer) serves durable-queue management,
// ConsumeDurableEventsWithAcks, ConsumeNonDurableEvents, the deprecated
// ConsumeDurableEvents and ManageDeadLetteredEvents over package
// delivery's queues, stream sessions and dead letters.
//
// # Keep-alive
//
// A consuming stream may stay idle for a long time. The notifications API's response
// messages have no keep-alive form and the API defines none (an empty
// ConsumeDurableEventsWithAcksResponse would carry delivery tag 0, which
// names no event), so none is sent: idle streams are kept alive below the
// RPC layer, by HTTP/2 PING frames. The server (functions/app.Serve, for
// the local adapter and Cloud Run) PINGs a connection it has heard nothing
// from for HERALD_HTTP2_PING_INTERVAL (default 30 s) and closes it when
// the PING is not acknowledged in app.PingAckTimeout. Because some load
// balancers do not count PINGs as traffic, and a proxy that terminates
// HTTP/2 receives the server's PINGs itself, clients should also enable
// gRPC keepalive (grpc-go: grpc.WithKeepaliveParams with
// keepalive.ClientParameters{Time: 30 * time.Second}) with a period
// shorter than the load balancer's idle timeout; the server answers every
// PING. A stream cut anyway ends UNAVAILABLE (the notifications API: "Connection lost
// (e.g. load balancer idle timeout)"): reconnect.
package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/accesslog"
	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta/consumerv1betaconnect"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/publisher/v1beta/publisherv1betaconnect"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/logredact"
	"github.com/heraldevents/herald/internal/telemetry"
)

// Mount is one handler and the path prefix it serves, e.g.
// "/nvidia.omniverse.notifications.publisher.v1beta.EventPublishingService/".
type Mount struct {
	Path    string
	Handler http.Handler
}

// Services selects the services Mounts serves. Health checking and
// reflection are always served, for the selected services.
type Services struct {
	// Publisher serves EventPublishingService.
	Publisher bool
	// Consumer serves EventConsumerService.
	Consumer bool
	// Ready makes health checking answer NOT_SERVING, for the server and
	// every served service, while it reports a dependency down (the checks
	// of GET /health/ready); nil: SERVING always.
	Ready *health.Checker
	// UnaryTimeout, when positive, ends the context of every unary RPC
	// (publishes, queue management) after this long, as
	// router.Options.RequestTimeout does for REST requests, so a broker or
	// store that never answers fails the call (DEADLINE_EXCEEDED) instead
	// of holding it. Streams are not bounded by it.
	UnaryTimeout time.Duration
}

// compressMinBytes is the smallest response message Herald compresses
// for a client that accepts gzip (grpc-accept-encoding). connect-go
// compresses every message by default; a typical event (about 1 KiB) then
// costs more CPU to gzip than it saves on the wire (resetting the
// compressor alone took a tenth of a gRPC stream's CPU), so only larger
// messages — a big event, a batch of results — are compressed, as
// grpc-go servers compress nothing unless configured to.
const compressMinBytes = 8 << 10

var compressLarge = connect.WithCompressMinBytes(compressMinBytes)

// unaryTimeout returns the handler options that bound unary RPCs by d
// (none when d is not positive).
func unaryTimeout(d time.Duration) []connect.HandlerOption {
	if d <= 0 {
		return nil
	}
	return []connect.HandlerOption{connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next(ctx, req)
		}
	}))}
}

// Mounts returns the handlers of the selected services, each behind
// Authenticate, followed by health checking and reflection (v1 and
// v1alpha) for them.
func Mounts(svc *delivery.Service, a auth.Authenticator, s Services) []Mount {
	var mounts []Mount
	var names []string
	if s.Publisher {
		path, h := publisherv1betaconnect.NewEventPublishingServiceHandler(&Publisher{Service: svc},
			append(unaryTimeout(s.UnaryTimeout), boundedCompression, compressLarge, connect.WithCodec(publishCodec{}), telemetry.ConnectHandlerOption())...)
		mounts = append(mounts, Mount{path, Authenticate(a, boundPublishRequests(h))})
		names = append(names, publisherv1betaconnect.EventPublishingServiceName)
	}
	if s.Consumer {
		path, h := consumerv1betaconnect.NewEventConsumerServiceHandler(&Consumer{Service: svc},
			append(unaryTimeout(s.UnaryTimeout), connect.WithReadMaxBytes(maxConsumerRequestBytes), compressLarge, telemetry.ConnectHandlerOption())...)
		mounts = append(mounts, Mount{path, Authenticate(a, holdFlushes(h))})
		names = append(names, consumerv1betaconnect.EventConsumerServiceName)
	}
	// The checker answers SERVING for "" (the whole server) and for each
	// served service, NOT_SERVING for them while a dependency is down, and
	// NOT_FOUND for any other name.
	path, h := grpchealth.NewHandler(readyChecker{grpchealth.NewStaticChecker(names...), s.Ready})
	mounts = append(mounts, Mount{path, h})
	reflector := grpcreflect.NewStaticReflector(append(names, grpchealth.HealthV1ServiceName)...)
	path, h = grpcreflect.NewHandlerV1(reflector)
	mounts = append(mounts, Mount{path, h})
	path, h = grpcreflect.NewHandlerV1Alpha(reflector)
	mounts = append(mounts, Mount{path, h})
	return mounts
}

// Code maps a herr code to its gRPC status code. It is the gRPC
// counterpart of functions/httpx.Status and the only such mapping; keep
// the two in step with the list in package herr.
//
// The REST distinction between a malformed request (400) and a
// well-formed but invalid one (422) has no gRPC counterpart: both, and
// OutOfRange (a parameter outside its documented range), are
// INVALID_ARGUMENT, the code the notifications API documents for a bad request.
// Unknown is INTERNAL: the notifications API documents INTERNAL for server errors.
func Code(c herr.Code) connect.Code {
	switch c {
	case herr.Malformed, herr.InvalidArgument, herr.OutOfRange:
		return connect.CodeInvalidArgument
	case herr.Unauthenticated:
		return connect.CodeUnauthenticated
	case herr.PermissionDenied:
		return connect.CodePermissionDenied
	case herr.NotFound:
		return connect.CodeNotFound
	case herr.AlreadyExists:
		return connect.CodeAlreadyExists
	case herr.FailedPrecondition:
		return connect.CodeFailedPrecondition
	case herr.Aborted:
		return connect.CodeAborted
	case herr.ResourceExhausted:
		return connect.CodeResourceExhausted
	case herr.Unavailable:
		return connect.CodeUnavailable
	case herr.DeadlineExceeded:
		return connect.CodeDeadlineExceeded
	case herr.Canceled:
		return connect.CodeCanceled
	case herr.Unimplemented:
		return connect.CodeUnimplemented
	default: // herr.Unknown, herr.Internal
		return connect.CodeInternal
	}
}

// Error returns err as a *connect.Error whose code is Code(herr.CodeOf(err))
// and whose message is herr.MessageOf(err): caller-safe, never the cause.
// Server-side failures (INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED,
// UNIMPLEMENTED) are logged with their cause and procedure, through the
// request's logger (accesslog.Logger), with any reconnect token cut out of
// the cause.
func Error(ctx context.Context, procedure string, err error) *connect.Error {
	code := Code(herr.CodeOf(err))
	switch code {
	case connect.CodeUnavailable:
		if httpx.IsLoadShed(err) { // logged by its source, rate-limited
			break
		}
		fallthrough
	case connect.CodeInternal, connect.CodeDeadlineExceeded, connect.CodeUnimplemented:
		accesslog.Logger(ctx).LogAttrs(ctx, slog.LevelError, "rpc failed",
			slog.String("procedure", procedure), slog.String("code", code.String()),
			slog.String("err", logredact.String(err.Error())))
	}
	return connect.NewError(code, errors.New(herr.MessageOf(err)))
}

// readyChecker answers gRPC health checks: the static checker's answer
// (NOT_FOUND for a service not served), turned NOT_SERVING while ready
// reports a dependency down. It implements only Check: Watch answers
// UNIMPLEMENTED, which clients treat as "poll Check".
type readyChecker struct {
	static *grpchealth.StaticChecker
	ready  *health.Checker
}

func (c readyChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	res, err := c.static.Check(ctx, req)
	if err != nil || res.Status != grpchealth.StatusServing {
		return res, err
	}
	rep, err := c.ready.Check(ctx)
	if err != nil {
		return nil, connect.NewError(connect.CodeCanceled, err)
	}
	if !rep.Ready() {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return res, nil
}
