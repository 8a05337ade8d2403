package drivertest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/cloudevent"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
)

// Sizes of the payload tests.
const (
	// heraldMaxMessage is the largest event message Herald accepts
	// (delivery.MaxMessageBytes, 256 KiB); it travels inside a CloudEvent
	// envelope, so the body on the broker is a little larger.
	heraldMaxMessage = 256 << 10
	// heraldBodyBudget is the body size Herald plans for: its largest
	// message plus room for the envelope to grow (a long source or
	// principal). Drivers that state no limit must carry it.
	heraldBodyBudget = 300 << 10
	// noLimitProbe is the body size a driver with MaxMessageBytes 0 must
	// carry ("no limit below 1 MiB").
	noLimitProbe = 1 << 20
)

// longResourceID returns a resource id of exactly filter.MaxResourceIDLength
// bytes, multi-byte characters and slashes included.
func longResourceID() string {
	var sb strings.Builder
	sb.WriteString("/ünïcode")
	for sb.Len()+len("/路径é") <= filter.MaxResourceIDLength {
		sb.WriteString("/路径é")
	}
	sb.WriteString(strings.Repeat("x", filter.MaxResourceIDLength-sb.Len()))
	return sb.String()
}

// testAttributesRoundTrip: Body bytes and every Metadata key and value
// come back unchanged: unicode, characters that mean something in broker
// subjects and URLs, the longest resource id, and no resource id at all.
func testAttributesRoundTrip(t *testing.T, f *fixture) {
	b := f.broker()
	sub := f.subscribe(b, "attrs", nil)

	unicode := f.message("order.created", "/ünïcode/路径")
	unicode.Metadata[pubsubx.AttrEventID] = "évènement-ü-路-" + f.run
	sent := []*pubsubx.Message{
		unicode,
		f.message("order.created", noResource),
		f.message("order.created", longResourceID()),
		f.message("order.created", `/a b/c?d=e&f#g%20+*>.~'"<tag>\end/`),
		f.message("Order_Created-v2.beta", "/"),
	}
	// Keep copies: a driver must not change the caller's message either.
	before := make([]pubsubx.Message, len(sent))
	for i, m := range sent {
		before[i] = pubsubx.Message{Body: append([]byte(nil), m.Body...), Metadata: clone(m.Metadata)}
	}
	f.send(b, sent...)
	for i, m := range sent {
		require.Equal(t, before[i].Body, m.Body, "Send changed the caller's Body")
		require.Equal(t, before[i].Metadata, m.Metadata, "Send changed the caller's Metadata")
	}

	got := f.receiveExactly(b, sub, msgsOf(before)...)
	for _, m := range before {
		r := got[eventID(&m)]
		require.Equal(t, string(m.Body), string(r.Body), "Body of %s", eventID(&m))
		require.Equal(t, m.Metadata, r.Metadata, "Metadata of %s", eventID(&m))
	}
	f.expectEmpty(b, sub)
}

// testEverySubscriptionDelivers: each subscription delivers the whole
// message, and settling it on one leaves it on the other. (Nothing may
// change a message once sent, so a driver may share one body between
// its deliveries: driver.Message.)
func testEverySubscriptionDelivers(t *testing.T, f *fixture) {
	b := f.broker()
	subA := f.subscribe(b, "isolated", nil)
	subB := f.subscribe(b, "isolated", nil)
	m := f.message("herald.test", "/isolated")
	want := pubsubx.Message{Body: append([]byte(nil), m.Body...), Metadata: clone(m.Metadata)}
	f.send(b, m)

	gotA := f.receiveUntil(b, subA, 1, hasCount(1))
	require.Equal(t, string(want.Body), string(gotA[0].Body), "Body on the first subscription")
	require.Equal(t, want.Metadata, gotA[0].Metadata, "Metadata on the first subscription")
	f.ack(b, subA, gotA)
	f.expectEmpty(b, subA)
	gotB := f.receiveExactly(b, subB, &want)[eventID(&want)]
	require.Equal(t, string(want.Body), string(gotB.Body), "Body on the second subscription")
	require.Equal(t, want.Metadata, gotB.Metadata, "Metadata on the second subscription")
}

// msgsOf returns pointers to the elements of ms.
func msgsOf(ms []pubsubx.Message) []*pubsubx.Message {
	out := make([]*pubsubx.Message, len(ms))
	for i := range ms {
		out[i] = &ms[i]
	}
	return out
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// encodePadded encodes a CloudEvent with subject whose data is the JSON
// object {"pad":"ppp…"} holding pad letters (so its data is pad+10 bytes).
func encodePadded(t testing.TB, pad int, subject string) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]string{"pad": strings.Repeat("p", pad)})
	require.NoError(t, err)
	body, err := cloudevent.Encode(cloudevent.Input{
		ID: "large", Source: "/herald/drivertest", Type: "herald.large", Subject: subject,
		Time: time.Unix(1700000000, 0).UTC(), PublishedAt: time.Unix(1700000001, 0).UTC(),
		PrincipalIdentity: "drivertest", Data: data,
	})
	require.NoError(t, err)
	return body
}

// bodyOfSize returns an encoded CloudEvent of exactly n bytes, padded in
// its data, with subject as its subject.
func bodyOfSize(t testing.TB, n int, subject string) []byte {
	t.Helper()
	envelope := len(encodePadded(t, 0, subject))
	require.GreaterOrEqual(t, n, envelope, "fixture: a body of %d bytes cannot hold the envelope", n)
	body := encodePadded(t, n-envelope, subject)
	require.Len(t, body, n, "fixture: padded body size")
	return body
}

// largestEventBody is Herald's largest event: a message of exactly 256 KiB
// with the longest resource id, encoded as Herald encodes it.
func largestEventBody(t testing.TB) []byte {
	t.Helper()
	return encodePadded(t, heraldMaxMessage-len(`{"pad":""}`), longResourceID())
}

// withBody returns a copy of m carrying body.
func withBody(m *pubsubx.Message, body []byte) *pubsubx.Message {
	return &pubsubx.Message{Body: body, Metadata: m.Metadata}
}

// testLargestEvent: Herald's largest event, a 300 KiB body, and a body at
// the driver's documented limit (Features.MaxMessageBytes; 1 MiB when the
// driver states none) round-trip byte for byte. A body over the limit
// fails Send with InvalidArgument or OutOfRange and is never delivered,
// truncated or otherwise.
func testLargestEvent(t *testing.T, f *fixture) {
	b := f.broker()
	sub := f.subscribe(b, "large", nil)
	limit := f.h.Features().MaxMessageBytes
	largest := largestEventBody(t)
	t.Logf("Herald's largest event is %d bytes on the broker; driver limit %d (0: none below 1 MiB)", len(largest), limit)
	require.Greater(t, len(largest), heraldMaxMessage, "fixture: the largest event exceeds its message")
	require.LessOrEqual(t, len(largest), heraldBodyBudget, "fixture: the largest event fits Herald's budget")

	bodies := [][]byte{largest, bodyOfSize(t, heraldBodyBudget, "/budget")}
	if limit == 0 {
		bodies = append(bodies, bodyOfSize(t, noLimitProbe, "/limit"))
	} else {
		bodies = append(bodies, bodyOfSize(t, limit, "/limit"))
	}
	var want []*pubsubx.Message
	for _, body := range bodies {
		m := withBody(f.message("herald.large", longResourceID()), body)
		if limit == 0 || len(body) <= limit {
			f.send(b, m)
			want = append(want, m)
			continue
		}
		err := b.Send(f.ctx, m)
		require.Error(t, err, "Send of %d bytes over the driver's limit of %d must fail", len(body), limit)
		require.Contains(t, []string{herr.InvalidArgument.String(), herr.OutOfRange.String()}, herr.CodeOf(err).String(),
			"Send of %d bytes over the size limit: want invalid_argument or out_of_range, got %v", len(body), err)
	}
	got := f.receiveExactly(b, sub, want...)
	for _, m := range want {
		r := got[eventID(m)]
		require.Equal(t, len(m.Body), len(r.Body), "size of %s", eventID(m))
		require.True(t, string(m.Body) == string(r.Body), "Body of %s changed in transit", eventID(m))
		require.Equal(t, m.Metadata, r.Metadata, "Metadata of %s", eventID(m))
	}
	f.expectEmpty(b, sub)
}
