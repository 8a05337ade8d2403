package drivertest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
)

// batchSize is the size of the suite's batch sends: more than one SNS
// PublishBatch (10) and not a multiple of it, so a driver that splits a
// batch must keep the pieces in order and handle a short last piece.
const batchSize = 125

// testBatchSendOrder: Broker.SendBatch (through the driver's batch API,
// in pieces where the driver takes fewer at once) gives every message its
// own nil result and delivers each exactly once; where the backend
// promises publish order, a single receiver sees two batches in send
// order, and Broker.KeepsPublishOrder says so.
func testBatchSendOrder(t *testing.T, f *fixture) {
	b := f.broker()
	require.Equal(t, f.h.Features().PublishOrder, b.KeepsPublishOrder(), "KeepsPublishOrder and Features.PublishOrder")
	sub := f.subscribe(b, "batchorder", nil)
	first := f.messages(batchSize, "herald.test", "/batch")
	second := f.messages(batchSize/5, "herald.test", "/batch")
	for _, batch := range [][]*pubsubx.Message{first, second} {
		errs := b.SendBatch(f.ctx, batch)
		require.Len(t, errs, len(batch), "SendBatch returns one result per message")
		for i, err := range errs {
			require.NoError(t, err, "SendBatch message %d (%s)", i, eventID(batch[i]))
		}
	}
	sent := append(append([]*pubsubx.Message(nil), first...), second...)
	if !f.h.Features().PublishOrder {
		t.Log("the backend does not promise publish order (Features.PublishOrder is false): checking delivery, not order")
		f.receiveExactly(b, sub, sent...)
		return
	}
	var got []*pubsubx.Message
	for len(got) < len(sent) {
		batch := f.receiveUntil(b, sub, 10, hasCount(1))
		f.ack(b, sub, batch)
		got = append(got, batch...)
	}
	require.Equal(t, ids(sent), ids(got), "a single receiver should see batch order")
	f.expectEmpty(b, sub)
}

// testBatchSendResults: one message of a batch that the broker refuses
// (a body of twice Features.MaxMessageBytes, clearly over a limit that
// a driver may state with a margin) fails alone with InvalidArgument,
// OutOfRange or ResourceExhausted, and the messages around it are sent;
// so does a nil message on every driver; on a closed broker every message
// of a batch fails with Unavailable or Canceled.
func testBatchSendResults(t *testing.T, f *fixture) {
	b := f.broker()
	if limit := f.h.Features().MaxMessageBytes; limit > 0 {
		sub := f.subscribe(b, "batchresults", nil)
		batch := f.messages(12, "herald.test", "/batch")
		bad := 5
		batch[bad].Body = bytes.Repeat([]byte("x"), 2*limit)
		errs := b.SendBatch(f.ctx, batch)
		require.Len(t, errs, len(batch), "SendBatch returns one result per message")
		var good []*pubsubx.Message
		for i, err := range errs {
			if i == bad {
				require.Error(t, err, "message %d is over the broker's limit", i)
				// resource_exhausted too: a server in front of which the
				// driver checks no size (the Pub/Sub test server's 4 MiB
				// gRPC limit) refuses it so.
				require.Contains(t, []string{herr.InvalidArgument.String(), herr.OutOfRange.String(), herr.ResourceExhausted.String()}, herr.CodeOf(err).String(),
					"the oversized message: want invalid_argument, out_of_range or resource_exhausted, got %v", err)
				continue
			}
			require.NoError(t, err, "message %d must be sent despite message %d failing", i, bad)
			good = append(good, batch[i])
		}
		f.receiveExactly(b, sub, good...)
	} else {
		t.Log("the backend has no message size limit (Features.MaxMessageBytes is 0): a refused message in a batch was not exercised")
	}

	// A message refused before it reaches the broker (nil) fails alone on
	// every driver, also in a batch the driver gets in pieces (more than
	// one SNS PublishBatch); the messages around it are sent.
	sub := f.subscribe(b, "batchnil", nil)
	good := f.messages(25, "herald.test", "/batch")
	withNil := append(append(append([]*pubsubx.Message(nil), good[:12]...), nil), good[12:]...)
	errs := b.SendBatch(f.ctx, withNil)
	require.Len(t, errs, len(withNil), "SendBatch returns one result per message")
	for i, err := range errs {
		if i == 12 {
			require.Equal(t, herr.InvalidArgument.String(), herr.CodeOf(err).String(), "the nil message: %v", err)
			continue
		}
		require.NoError(t, err, "message %d must be sent despite message 12 failing", i)
	}
	f.receiveExactly(b, sub, good...)

	require.NoError(t, b.Close(), "Close")
	batch := f.messages(3, "herald.test", "/batch")
	errs = b.SendBatch(f.ctx, batch)
	require.Len(t, errs, len(batch), "SendBatch returns one result per message")
	for i, err := range errs {
		require.Error(t, err, "SendBatch message %d on a closed broker must fail", i)
		require.Contains(t, []string{herr.Unavailable.String(), herr.Canceled.String()}, herr.CodeOf(err).String(),
			"SendBatch on a closed broker: want unavailable or canceled, got %v", err)
	}
}
