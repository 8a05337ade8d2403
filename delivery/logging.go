package delivery

import (
	"log/slog"
	"strings"

	"github.com/heraldevents/herald/internal/logredact"
)

// A non-durable queue's id is its reconnect token (the notifications API): whoever holds
// it can resume the stream, so it is kept out of logs like any token. Log
// lines name such a queue by a short prefix, and the token is cut out of
// the error text (store errors quote the consumer id).

// redactedLength is how much of a reconnect token a log line shows: enough
// to tell queues apart while reading logs, too little to resume one. It is
// logredact.Kept, so that a line redacted here and one scrubbed by the
// loggers' logredact.Handler name a queue alike.
const redactedLength = logredact.Kept

// queueAttr is the "queue" attribute of a log line about queue id of
// kind.
func queueAttr(kind StreamKind, id string) slog.Attr {
	return slog.String("queue", redactQueue(kind, id))
}

// RedactQueue returns how a log line names queue id of kind: a durable
// queue by its queue_id, a non-durable queue (whose id is its reconnect
// token) by its first 7 characters and "…". Transports that log queue ids
// of their own (the API Gateway bridge, functions/wslambda) use it, and
// cut the id out of error texts they log with strings.ReplaceAll(text,
// id, RedactQueue(kind, id)).
func RedactQueue(kind StreamKind, id string) string { return redactQueue(kind, id) }

func redactQueue(kind StreamKind, id string) string {
	if kind != NonDurable || len(id) <= redactedLength {
		return id
	}
	return id[:redactedLength] + "…"
}

// errAttr is the "err" attribute of a log line about queue id of kind,
// with a non-durable queue's token cut out of the error text.
func errAttr(kind StreamKind, id string, err error) slog.Attr {
	if err == nil {
		return slog.Any("err", nil)
	}
	msg := err.Error()
	if kind == NonDurable && id != "" {
		msg = strings.ReplaceAll(msg, id, redactQueue(kind, id))
	}
	return slog.String("err", msg)
}
