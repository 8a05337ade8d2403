package rabbit

import (
	"context"
	"errors"
	"net"
	"syscall"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldevents/herald/herr"
)

var errClosed = herr.New(herr.Unavailable, "RabbitMQ broker is closed")

// amqpCodes is the one table from AMQP reply codes to herr codes. A
// channel exception (404, 406, 405, 403) closes the channel it happened on;
// callers open a fresh channel per operation, so the table only classifies.
//
// Credential and permission failures are Unavailable, not Unauthenticated or
// PermissionDenied: they are faults of the deployment's broker account, not
// of Herald's caller, who should see a retryable 503 while an operator
// fixes the account.
var amqpCodes = map[int]herr.Code{
	amqp.NotFound:           herr.NotFound,
	amqp.PreconditionFailed: herr.FailedPrecondition,
	amqp.ResourceLocked:     herr.FailedPrecondition,
	amqp.ContentTooLarge:    herr.InvalidArgument,
	amqp.AccessRefused:      herr.Unavailable,
	amqp.NotAllowed:         herr.Unavailable,
	amqp.ConnectionForced:   herr.Unavailable,
	amqp.ChannelError:       herr.Unavailable, // amqp.ErrClosed, amqp.ErrChannelMax
	amqp.ResourceError:      herr.Unavailable,
	amqp.InternalError:      herr.Unavailable,
	amqp.FrameError:         herr.Unavailable,
	amqp.UnexpectedFrame:    herr.Unavailable,
	amqp.CommandInvalid:     herr.Unavailable,
	amqp.SyntaxError:        herr.Unavailable,
}

// codeOf classifies an error of amqp091-go or of the network under it.
func codeOf(err error) herr.Code {
	var ae *amqp.Error
	switch {
	case errors.Is(err, context.Canceled):
		return herr.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return herr.DeadlineExceeded
	case errors.As(err, &ae):
		if c, ok := amqpCodes[ae.Code]; ok {
			return c
		}
		return herr.Unavailable
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return herr.Unavailable
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return herr.Unavailable
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return herr.Unavailable
	}
	return herr.Unknown
}

// wrap returns err as a herr error with a caller-safe message; herr errors
// pass through unchanged.
func wrap(err error, message string) error {
	if err == nil {
		return nil
	}
	var he *herr.Error
	if errors.As(err, &he) {
		return err
	}
	switch c := codeOf(err); c {
	case herr.Unknown:
		return herr.Wrap(herr.Unavailable, err, message+": RabbitMQ failed")
	default:
		return herr.Wrap(c, err, message)
	}
}

// isNotFound reports whether err is a 404 channel exception.
func isNotFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}
