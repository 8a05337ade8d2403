package nats

import (
	"context"
	"errors"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldevents/herald/herr"
)

var errClosed = herr.New(herr.Unavailable, "NATS broker is closed")

// sentinels is the one table from nats.go and jetstream errors to herr
// codes, checked in order with errors.Is.
var sentinels = []struct {
	err  error
	code herr.Code
}{
	{context.Canceled, herr.Canceled},
	{context.DeadlineExceeded, herr.DeadlineExceeded},
	{jetstream.ErrConsumerNotFound, herr.NotFound},
	{jetstream.ErrConsumerDoesNotExist, herr.NotFound},
	{jetstream.ErrStreamNotFound, herr.NotFound},
	{jetstream.ErrNoStreamResponse, herr.Unavailable}, // no stream captures the subject: deleted under us
	{jetstream.ErrConsumerExists, herr.AlreadyExists},
	{jetstream.ErrConsumerNameAlreadyInUse, herr.AlreadyExists},
	{jetstream.ErrMaximumConsumersLimit, herr.ResourceExhausted},
	{jetstream.ErrJetStreamNotEnabled, herr.Unavailable},
	{jetstream.ErrJetStreamNotEnabledForAccount, herr.Unavailable},
	{natsgo.ErrMaxPayload, herr.InvalidArgument},
	{natsgo.ErrBadSubject, herr.InvalidArgument},
	{natsgo.ErrBadHeaderMsg, herr.InvalidArgument},
	{natsgo.ErrConnectionClosed, herr.Unavailable},
	{natsgo.ErrConnectionDraining, herr.Unavailable},
	{natsgo.ErrConnectionReconnecting, herr.Unavailable},
	{natsgo.ErrReconnectBufExceeded, herr.Unavailable},
	{natsgo.ErrNoServers, herr.Unavailable},
	{natsgo.ErrTimeout, herr.Unavailable},
	{natsgo.ErrNoResponders, herr.Unavailable},
	{natsgo.ErrAuthorization, herr.Unavailable},
	{natsgo.ErrAuthExpired, herr.Unavailable},
	{natsgo.ErrStaleConnection, herr.Unavailable},
	{natsgo.ErrSlowConsumer, herr.Unavailable},
}

// apiCodes maps JetStream API error codes that have no sentinel.
var apiCodes = map[jetstream.ErrorCode]herr.Code{
	jetstream.JSErrCodeConsumerNotFound:      herr.NotFound,
	jetstream.JSErrCodeStreamNotFound:        herr.NotFound,
	jetstream.JSErrCodeConsumerExists:        herr.AlreadyExists,
	jetstream.JSErrCodeConsumerNameExists:    herr.AlreadyExists,
	jetstream.JSErrCodeMaximumConsumersLimit: herr.ResourceExhausted,
	jetstream.JSErrCodeMessageNotFound:       herr.NotFound,
	// The stream could not store a message: at its bounds (max_pending,
	// max_pending_bytes with overflow=reject-publish), or out of storage.
	jsErrCodeStreamStoreFailed: herr.ResourceExhausted,
}

// jsErrCodeStreamStoreFailed is the server's JSStreamStoreFailedF, which
// nats.go names no constant for: "maximum messages exceeded", "maximum
// bytes exceeded" and other storage failures of a publish.
const jsErrCodeStreamStoreFailed jetstream.ErrorCode = 10077

// codeOf classifies an error of nats.go, its jetstream package or the
// network. Credential failures are Unavailable: they are faults of the
// deployment's NATS account, not of Herald's caller.
func codeOf(err error) herr.Code {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.code
		}
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		if c, ok := apiCodes[api.ErrorCode]; ok {
			return c
		}
		switch {
		case api.Code == 404:
			return herr.NotFound
		case api.Code == 400:
			return herr.InvalidArgument
		case api.Code >= 500:
			return herr.Unavailable
		}
	}
	return herr.Unknown
}

// wrap returns err as a herr error with a caller-safe message; herr errors
// pass through unchanged, and what the table does not know is Unavailable.
func wrap(err error, message string) error {
	if err == nil {
		return nil
	}
	var he *herr.Error
	if errors.As(err, &he) {
		return err
	}
	c := codeOf(err)
	if c == herr.Unknown {
		c = herr.Unavailable
	}
	return herr.Wrap(c, err, message)
}
