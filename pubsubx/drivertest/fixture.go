package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
)

// Waits the suite uses. None is asserted: they bound how long a check may
// take before it fails, and how long a receive listens for a message that
// must not come.
const (
	// pollWait is the wait of a Receive that expects messages.
	pollWait = 2 * time.Second
	// quietWait is the wait of a Receive that expects none: long enough for
	// a message in flight inside the broker to show up, short enough that
	// the suite stays quick on the in-memory driver.
	quietWait = time.Second
	// livenessBound is how long a check keeps receiving before it reports
	// the messages that never arrived.
	livenessBound = 60 * time.Second
	// cleanupTimeout bounds deleting a subscription or closing a broker
	// when a test ends.
	cleanupTimeout = 30 * time.Second
)

// fixture is one subtest's bundle: the harness, the test, and a prefix
// that makes its names and event ids unique.
type fixture struct {
	t   testing.TB
	h   Harness
	ctx context.Context
	run string        // unique per fixture
	seq *atomic.Int64 // numbers event ids
}

func newFixture(t testing.TB, h Harness) *fixture {
	return &fixture{t: t, h: h, ctx: t.Context(), run: randomHex(6), seq: new(atomic.Int64)}
}

// in returns f for subtest t: require failures must stop the goroutine of
// the test that owns them. Event ids stay unique across both.
func (f *fixture) in(t testing.TB) *fixture {
	return &fixture{t: t, h: f.h, ctx: t.Context(), run: f.run, seq: f.seq}
}

// randomHex returns 2n lower-case hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// subName returns a unique subscription name built from letters, digits and
// '-' only, at most 36 characters, so that every backend accepts it (Pub/Sub
// wants a leading letter; SQS, RabbitMQ and NATS forbid '.', '*', '>').
func subName(tag string) string {
	if len(tag) > 16 {
		tag = tag[:16]
	}
	return "dt-" + tag + "-" + randomHex(6)
}

// broker opens a broker from the harness and closes it when the test ends.
func (f *fixture) broker() *pubsubx.Broker {
	f.t.Helper()
	b, err := f.h.MakeBroker(f.ctx, f.t)
	require.NoError(f.t, err, "MakeBroker")
	f.t.Cleanup(func() { closeQuietly(f.t, b) })
	return b
}

// secondClient opens another client on b's topic and closes it when the
// test ends.
func (f *fixture) secondClient(b *pubsubx.Broker) *pubsubx.Broker {
	f.t.Helper()
	c, err := f.h.MakeSecondClient(f.ctx, f.t, b)
	require.NoError(f.t, err, "MakeSecondClient")
	f.t.Cleanup(func() { closeQuietly(f.t, c) })
	return c
}

// closeQuietly closes b, logging (not failing on) an error: tests that
// close a broker themselves close it twice.
func closeQuietly(t testing.TB, b *pubsubx.Broker) {
	if err := b.Close(); err != nil {
		t.Logf("closing broker at cleanup: %v", err)
	}
}

// subscribe creates a subscription with a unique name on b and deletes it
// when the test ends.
func (f *fixture) subscribe(b *pubsubx.Broker, tag string, groups filter.Groups) string {
	f.t.Helper()
	name := subName(tag)
	require.NoError(f.t, b.CreateSubscription(f.ctx, name, groups), "CreateSubscription %s", name)
	f.deleteAtCleanup(b, name)
	return name
}

// deleteAtCleanup deletes subscription name through b when the test ends.
// NotFound is expected (the test may have deleted it); other errors are
// logged, since a closed broker cannot delete.
func (f *fixture) deleteAtCleanup(b *pubsubx.Broker, name string) {
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := b.DeleteSubscription(ctx, name); err != nil && herr.CodeOf(err) != herr.NotFound {
			f.t.Logf("deleting subscription %s at cleanup: %v", name, err)
		}
	})
}

// noResource marks a message sent without a resource_id attribute.
const noResource = "\x00none"

// message builds an event as Herald publishes it: an encoded CloudEvent
// body and the event_type, event_id and (unless resourceID is noResource)
// resource_id attributes. Its event id is unique to the fixture.
func (f *fixture) message(eventType, resourceID string) *pubsubx.Message {
	f.t.Helper()
	id := fmt.Sprintf("%s-%05d", f.run, f.seq.Add(1))
	subject := resourceID
	if resourceID == noResource {
		subject = ""
	}
	data, err := json.Marshal(map[string]any{"event": id, "note": "héllo ✓"})
	require.NoError(f.t, err)
	body, err := cloudevent.Encode(cloudevent.Input{
		ID: id, Source: "/herald/drivertest", Type: eventType, Subject: subject,
		Time: time.Unix(1700000000, 0).UTC(), PublishedAt: time.Unix(1700000001, 0).UTC(),
		PrincipalIdentity: "drivertest", Data: data,
	})
	require.NoError(f.t, err)
	md := map[string]string{pubsubx.AttrEventType: eventType, pubsubx.AttrEventID: id}
	if resourceID != noResource {
		md[pubsubx.AttrResourceID] = resourceID
	}
	return &pubsubx.Message{Body: body, Metadata: md}
}

// messages builds n events of one type and resource id.
func (f *fixture) messages(n int, eventType, resourceID string) []*pubsubx.Message {
	out := make([]*pubsubx.Message, n)
	for i := range out {
		out[i] = f.message(eventType, resourceID)
	}
	return out
}

// eventID is the event_id attribute, the suite's identity for a message.
func eventID(m *pubsubx.Message) string { return m.Metadata[pubsubx.AttrEventID] }

// ids lists the event ids of msgs in order.
func ids(msgs []*pubsubx.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = eventID(m)
	}
	return out
}

// send sends msgs one after another, in order, requiring each to succeed.
func (f *fixture) send(b *pubsubx.Broker, msgs ...*pubsubx.Message) {
	f.t.Helper()
	for _, m := range msgs {
		require.NoError(f.t, b.Send(f.ctx, m), "Send %s", eventID(m))
	}
}
