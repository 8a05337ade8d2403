package gcppubsub

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/heraldevents/herald/herr"
)

// grpcCodes is the one table from gRPC status codes (what every Pub/Sub
// RPC returns) to herr codes. Codes Google documents as transient for
// Pub/Sub (DEADLINE_EXCEEDED, INTERNAL, UNKNOWN, UNAVAILABLE) become
// herr.Unavailable, so callers retry them. A Canceled status that the
// caller's context did not cause means the connection went away, which is
// Unavailable too. Codes not listed are herr.Unknown.
var grpcCodes = map[codes.Code]herr.Code{
	codes.NotFound:           herr.NotFound,
	codes.AlreadyExists:      herr.AlreadyExists,
	codes.InvalidArgument:    herr.InvalidArgument,
	codes.OutOfRange:         herr.OutOfRange,
	codes.ResourceExhausted:  herr.ResourceExhausted,
	codes.FailedPrecondition: herr.FailedPrecondition,
	codes.Aborted:            herr.Aborted,
	codes.PermissionDenied:   herr.PermissionDenied,
	codes.Unauthenticated:    herr.Unauthenticated,
	codes.Unimplemented:      herr.Unimplemented,
	codes.Unavailable:        herr.Unavailable,
	codes.DeadlineExceeded:   herr.Unavailable,
	codes.Internal:           herr.Unavailable,
	codes.Unknown:            herr.Unavailable,
	codes.Canceled:           herr.Unavailable,
	codes.DataLoss:           herr.Internal,
}

// errClosed is returned by every call on a closed broker.
var errClosed = herr.New(herr.Unavailable, "gcppubsub: the broker is closed")

// codeOf returns the gRPC status code of err (Unknown for errors that
// carry none, such as a failed dial).
func codeOf(err error) codes.Code {
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Unknown
}

// wrap turns an error from a Pub/Sub RPC into a herr-coded one whose
// message (shown to callers) is msg. The caller's own cancellation or
// deadline keeps its meaning (Canceled, DeadlineExceeded); a call cut off
// by Close is Unavailable.
func (b *broker) wrap(ctx context.Context, err error, msg string) error {
	if err == nil {
		return nil
	}
	var he *herr.Error
	if errors.As(err, &he) {
		return err // already coded by this package
	}
	if b.isClosed() {
		return herr.Wrap(herr.Unavailable, err, "gcppubsub: the broker is closed")
	}
	switch ctx.Err() {
	case context.Canceled:
		return herr.Wrap(herr.Canceled, err, msg+": canceled")
	case context.DeadlineExceeded:
		return herr.Wrap(herr.DeadlineExceeded, err, msg+": the request timed out")
	}
	code, ok := grpcCodes[codeOf(err)]
	if !ok {
		code = herr.Unknown
	}
	return herr.Wrap(code, err, msg)
}
