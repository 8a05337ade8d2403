package grpcapi

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/heraldevents/herald/delivery"
)

// Publish size bounds. A publish answer echoes every event it was sent
// (PublishingResult.event), so the request's bound is what keeps the
// answer within what a gRPC client accepts: grpc-go, grpc-java and gRPC
// C-core (Python, C++, …) refuse a received message over 4 MiB by
// default, with RESOURCE_EXHAUSTED — which the notifications API tells a
// publisher to retry, so an answer over it would get a whole batch
// published twice. REST bounds its batch for the same reason (the answer
// must fit a Lambda payload: functions/publish.MaxBatchBody).
const (
	// MaxReplyBytes is the largest message a gRPC client receives by
	// default: 4 MiB. No publish answer is larger (TestReplyBound).
	MaxReplyBytes = 4 << 20
	// MaxPublishRequestBytes bounds a PublishEvent or BatchPublishEvents
	// request: 3 MiB (3,145,728 bytes) of protobuf message, after
	// decompression. A larger one is INVALID_ARGUMENT and nothing of it
	// is published; it is refused as soon as its bytes pass the bound,
	// before it is decoded. No valid event is refused by it: a 256 KiB
	// JSON message (delivery.MaxMessageBytes) is at most about 1.4 MiB
	// as a google.protobuf.Struct (a number costs 11 bytes in a list
	// against 2 in JSON).
	MaxPublishRequestBytes = 3 << 20
	// maxResultGrowth bounds how many bytes one PublishingResult adds to
	// its event as the request carried it (the echo re-encodes what was
	// decoded, which is never longer): the result's own tag and length
	// (1+4), the larger of success (2) with an occurred_at filled in
	// (2+7+6) and a failure_reason (1+2+delivery.MaxFailureReasonBytes),
	// an empty message filled in (2), and a byte more for the event's
	// length.
	maxResultGrowth = 5 + 3 + delivery.MaxFailureReasonBytes + 2 + 1
)

// The bound holds for the largest batch, every event failing with the
// longest reason: 3 MiB + 1,000 × 1,035 bytes < 4 MiB. A change that
// breaks it fails to compile.
const _ = uint(MaxReplyBytes - MaxPublishRequestBytes - delivery.MaxBatchEvents*maxResultGrowth)

// envelopeBytes is the prefix of an enveloped message (gRPC, gRPC-Web,
// the Connect protocol's streams): a flag byte and a 4-byte length.
const envelopeBytes = 5

// errRequestTooLarge is the answer to a publish request over
// MaxPublishRequestBytes. It is INVALID_ARGUMENT, not connect-go's
// RESOURCE_EXHAUSTED for a message over its read limit: the notifications
// API reserves RESOURCE_EXHAUSTED for "overloaded, retry", and sending
// the same request again cannot succeed.
func errRequestTooLarge() *connect.Error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
		"the request is larger than %d bytes (3 MiB), the limit of a publish request: its answer echoes every event and must fit the 4 MiB a gRPC client accepts; send fewer events per batch",
		MaxPublishRequestBytes))
}

// boundPublishRequests refuses a publish request whose message is over
// MaxPublishRequestBytes with errRequestTooLarge, reading no more of it
// than the bound: the body (the message, in an envelope unless it is a
// Connect unary call) is cut there, and a compressed message is cut as
// it is decompressed (boundedGzip). connect-go passes an error of its own
// type from the body or the decompressor to the client as it is, so the
// answer is INVALID_ARGUMENT in every protocol. connect-go's own read
// limit (connect.WithReadMaxBytes) is not set on the publisher service:
// it answers RESOURCE_EXHAUSTED.
func boundPublishRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := int64(MaxPublishRequestBytes)
		ct := r.Header.Get("Content-Type")
		if strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+") {
			limit += envelopeBytes
		}
		r.Body = &boundedBody{r: r.Body, left: limit, refuse: r.ContentLength > limit}
		h.ServeHTTP(w, r)
	})
}

// boundedBody reads at most left bytes of r, then fails with
// errRequestTooLarge; refuse fails the first read (a declared length
// over the bound).
type boundedBody struct {
	r      io.ReadCloser
	left   int64
	refuse bool
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.refuse {
		return 0, errRequestTooLarge()
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		b.refuse = true
		return 0, errRequestTooLarge()
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.r.Close() }

// boundedGzip is the publisher's gzip decompressor: the standard
// library's, failing with errRequestTooLarge once it has produced more
// than MaxPublishRequestBytes, so that a small compressed request cannot
// expand past the bound (nor into memory).
type boundedGzip struct {
	gzip.Reader
	n int64
}

func (d *boundedGzip) Read(p []byte) (int, error) {
	n, err := d.Reader.Read(p)
	d.n += int64(n)
	if d.n > MaxPublishRequestBytes {
		return 0, errRequestTooLarge()
	}
	return n, err
}

// Reset starts a new message.
func (d *boundedGzip) Reset(r io.Reader) error {
	d.n = 0
	return d.Reader.Reset(r)
}

// boundedCompression is the publisher's gzip: connect-go's default
// compressor, and boundedGzip to decompress.
var boundedCompression = connect.WithCompression("gzip",
	func() connect.Decompressor { return &boundedGzip{} },
	func() connect.Compressor { return gzip.NewWriter(io.Discard) })
