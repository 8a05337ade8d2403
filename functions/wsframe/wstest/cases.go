package wstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/heraldevents/herald/functions/wsframe"
)

// testConnected: a fresh non-durable stream answers connected with a
// reconnect token and the open frame's id.
func testConnected(t *testing.T, h *Harness) {
	c := Dial(t, h, h.Token)
	f := c.Open(map[string]any{"stream": "non_durable", "filter_groups": groups(unique("ws.connected"))})
	if f.ReconnectToken == "" || f.QueueID != "" {
		t.Fatalf("connected frame of a non-durable stream carries a reconnect token only: %+v", f)
	}
	c.Close()
}

// testAccessTokenQuery: a browser, which cannot set headers, sends the
// token as the access_token query parameter.
func testAccessTokenQuery(t *testing.T, h *Harness) {
	ws, res, err := h.Dial(t, "", url.Values{"access_token": {h.Token}})
	if err != nil {
		t.Fatalf("dial with access_token: %v (%s)", err, status(res))
	}
	c := &Conn{t: t, h: h, ws: ws}
	t.Cleanup(func() { _ = ws.Close() })
	c.Open(map[string]any{"stream": "non_durable", "filter_groups": groups(unique("ws.query"))})
	c.Close()
}

// testPingPong: a ping frame is answered by a pong with its id, before and
// after open.
func testPingPong(t *testing.T, h *Harness) {
	c := Dial(t, h, h.Token)
	c.Send(map[string]any{"type": "ping", "id": "p-1"})
	if f := c.Expect(wsframe.TypePong); f.ID != "p-1" {
		t.Fatalf("pong does not echo the id: %+v", f)
	}
	c.Open(map[string]any{"stream": "non_durable", "filter_groups": groups(unique("ws.ping"))})
	c.Send(map[string]any{"type": "ping", "id": "p-2"})
	if f := c.Expect(wsframe.TypePong); f.ID != "p-2" {
		t.Fatalf("pong does not echo the id: %+v", f)
	}
	c.Close()
}

// testPublishDemandEvents: events published after open arrive once
// demanded, without delivery tags (non-durable events need no settling).
func testPublishDemandEvents(t *testing.T, h *Harness) {
	typ := unique("ws.demand")
	c := Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "non_durable", "filter_groups": groups(typ)})
	Publish(t, h, typ, 0, 2)
	c.Demand(2)
	evs := c.Events(2)
	for i, f := range evs {
		if f.DeliveryTag != 0 || f.Event.EventType != typ || f.DeliveryCount < 1 || f.Event.PublishedAt.IsZero() {
			t.Fatalf("event %d: %+v", i, f)
		}
	}
	got := []int{N(t, evs[0]), N(t, evs[1])}
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("events %v, want 0 and 1", got)
	}
	c.Quiet()
	c.Close()
}

// testFlowControl: events go out only against demand: 10 published,
// demand 3 → exactly 3; demand 7 → the other 7.
func testFlowControl(t *testing.T, h *Harness) {
	typ := unique("ws.flow")
	c := Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "non_durable", "filter_groups": groups(typ)})
	Publish(t, h, typ, 0, 10)
	c.Demand(3)
	seen := map[int]bool{}
	for _, f := range c.Events(3) {
		seen[N(t, f)] = true
	}
	c.Quiet()
	c.Demand(7)
	for _, f := range c.Events(7) {
		seen[N(t, f)] = true
	}
	c.Quiet()
	if len(seen) != 10 {
		t.Fatalf("saw %d distinct events of 10", len(seen))
	}
	c.Close()
}

// testDurableAckNack: durable events carry tags; a nack redelivers with
// delivery_count+1 and a new tag; an ack settles; unknown tags are
// skipped; every settlement is answered by settled with its id.
func testDurableAckNack(t *testing.T, h *Harness) {
	typ, q := unique("ws.acks"), unique("ws-q-acks")
	CreateQueue(t, h, q, typ)
	c := Dial(t, h, h.Token)
	f := c.Open(map[string]any{"stream": "durable", "queue_id": q})
	if f.QueueID != q || f.ReconnectToken != "" {
		t.Fatalf("connected frame of a durable stream names the queue: %+v", f)
	}
	Publish(t, h, typ, 0, 2)
	c.Demand(10)
	evs := c.Events(2)
	for i, e := range evs {
		if e.DeliveryTag < 1 || e.DeliveryCount != 1 {
			t.Fatalf("event %d: want a tag and delivery_count 1, got %+v", i, e)
		}
	}
	if evs[0].DeliveryTag == evs[1].DeliveryTag {
		t.Fatal("two events share a tag")
	}
	// Every event carries its id and resource (Herald's additions to the
	// published Event), the id one per event.
	for i, e := range evs {
		if e.Event.ID == "" || e.Event.Resource.ResourceID != fmt.Sprintf("/n/%d", N(t, e)) {
			t.Fatalf("event %d: want an id and resource /n/%d, got %+v", i, N(t, e), e.Event)
		}
	}
	if evs[0].Event.ID == evs[1].Event.ID {
		t.Fatal("two events share an id")
	}
	nacked := evs[0]
	c.Send(map[string]any{"type": "nack", "id": "n-1", "delivery_tags": []int64{nacked.DeliveryTag}})
	s := c.Answer(wsframe.TypeSettled, "n-1")
	if *s.Nacked != 1 || *s.Acked != 0 || *s.Skipped != 0 {
		t.Fatalf("nack: %+v", s)
	}
	again := c.Events(1)[0]
	if N(t, again) != N(t, nacked) || again.DeliveryCount != 2 || again.DeliveryTag == nacked.DeliveryTag {
		t.Fatalf("redelivery after nack: want n %d, delivery_count 2, a new tag; got %+v", N(t, nacked), again)
	}
	if again.Event.ID != nacked.Event.ID {
		t.Fatalf("a redelivery carries the event's id: want %q, got %q", nacked.Event.ID, again.Event.ID)
	}
	c.Send(map[string]any{"type": "ack", "id": "a-1", "delivery_tags": []int64{evs[1].DeliveryTag, again.DeliveryTag, 99999}})
	s = c.Answer(wsframe.TypeSettled, "a-1")
	if *s.Acked != 2 || *s.Nacked != 0 || *s.Skipped != 1 {
		t.Fatalf("ack: %+v", s)
	}
	c.Send(map[string]any{"type": "ack", "id": "a-2", "delivery_tags": []int64{again.DeliveryTag}})
	if s = c.Answer(wsframe.TypeSettled, "a-2"); *s.Acked != 0 || *s.Skipped != 1 {
		t.Fatalf("a settled tag is skipped: %+v", s)
	}
	c.Quiet()
	c.Close()
}

// testDurableExtendAndDelayedNack: an extend frame is answered by
// extended (held tags extended, others skipped; the tags stay unsettled);
// a nack with a delay is not redelivered while new events flow.
func testDurableExtendAndDelayedNack(t *testing.T, h *Harness) {
	typ, q := unique("ws.extend"), unique("ws-q-extend")
	CreateQueue(t, h, q, typ)
	c := Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "durable", "queue_id": q})
	Publish(t, h, typ, 0, 2)
	c.Demand(10)
	evs := c.Events(2)
	held := evs[0]
	if N(t, evs[1]) == 0 {
		held = evs[1]
	}
	c.Send(map[string]any{"type": "extend", "id": "e-1", "delivery_tags": []int64{held.DeliveryTag, 99999}, "seconds": 600})
	x := c.Answer(wsframe.TypeExtended, "e-1")
	if x.Extended == nil || x.Skipped == nil || x.Capped == nil || *x.Extended != 1 || *x.Skipped != 1 || *x.Capped != 0 {
		t.Fatalf("extend: want extended 1, skipped 1, capped 0; got %+v", x)
	}

	// The extended event is still unsettled: nack it with an hour's delay.
	c.Send(map[string]any{"type": "nack", "id": "n-1", "delivery_tags": []int64{held.DeliveryTag}, "delay": 3600})
	if s := c.Answer(wsframe.TypeSettled, "n-1"); *s.Nacked != 1 || *s.Skipped != 0 {
		t.Fatalf("delayed nack: %+v", s)
	}
	Publish(t, h, typ, 2, 1)
	fresh := c.Events(1)[0]
	if N(t, fresh) != 2 {
		t.Fatalf("while the nacked event waits, new events flow: want n 2, got %+v", fresh)
	}
	other := evs[0]
	if other.DeliveryTag == held.DeliveryTag {
		other = evs[1]
	}
	c.Send(map[string]any{"type": "ack", "id": "a-1", "delivery_tags": []int64{other.DeliveryTag, fresh.DeliveryTag}})
	if s := c.Answer(wsframe.TypeSettled, "a-1"); *s.Acked != 2 {
		t.Fatalf("ack: %+v", s)
	}
	c.Send(map[string]any{"type": "extend", "id": "e-2", "delivery_tags": []int64{held.DeliveryTag}, "seconds": 60})
	if x := c.Answer(wsframe.TypeExtended, "e-2"); *x.Extended != 0 || *x.Skipped != 1 {
		t.Fatalf("a nacked tag is not extended: %+v", x)
	}
	c.Quiet() // the nacked event is not back
	c.Close()
}

// testReconnect: a non-durable queue outlives its connection for the
// reconnect grace: events published while away arrive on reconnect with
// the token; previous_filter_groups moves its filters.
func testReconnect(t *testing.T, h *Harness) {
	typA, typB := unique("ws.reconnect-a"), unique("ws.reconnect-b")
	c := Dial(t, h, h.Token)
	token := c.Open(map[string]any{"stream": "non_durable", "filter_groups": groups(typA)}).ReconnectToken
	c.Close()

	Publish(t, h, typA, 0, 2)
	c = Dial(t, h, h.Token)
	if f := c.Open(map[string]any{"stream": "non_durable", "reconnect_token": token}); f.ReconnectToken != token {
		t.Fatalf("reconnect answers the same token: %+v", f)
	}
	c.Demand(2)
	got := []int{}
	for _, f := range c.Events(2) {
		got = append(got, N(t, f))
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("events published while away: %v", got)
	}
	c.Quiet()
	c.Close()

	// Move the queue from typA to typB.
	c = Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "non_durable", "reconnect_token": token,
		"previous_filter_groups": groups(typA), "filter_groups": groups(typB)})
	Publish(t, h, typA, 10, 1)
	Publish(t, h, typB, 20, 1)
	c.Demand(5)
	for {
		f := c.Events(1)[0]
		if !h.Push && f.Event.EventType == typA && f.DeliveryCount > 1 {
			// On API Gateway every frame is its own invocation: the one
			// that posted events 0 and 1 acknowledges them after posting,
			// and may still be doing so when the client's ping is answered
			// and the connection closes. Such an event comes back on
			// reconnect (at least once): a redelivery, never a new typA
			// event, which the filter update must keep out.
			c.Demand(1)
			continue
		}
		if f.Event.EventType != typB || N(t, f) != 20 {
			t.Fatalf("after the filter update only %s arrives, got %+v (type %s)", typB, f, f.Event.EventType)
		}
		break
	}
	c.Quiet()
	c.Close()
}

// testReconnectTokenOfAnother: a principal holding another's reconnect
// token may resume the queue but not re-filter it: the open with
// previous_filter_groups is a fatal 403, and the queue keeps its filters
// and every event, which its owner then receives.
func testReconnectTokenOfAnother(t *testing.T, h *Harness) {
	typA, typB := unique("ws.owned-a"), unique("ws.owned-b")
	c := Dial(t, h, h.Token)
	token := c.Open(map[string]any{"stream": "non_durable", "filter_groups": groups(typA)}).ReconnectToken

	o := Dial(t, h, h.OtherToken)
	o.Send(map[string]any{"type": wsframe.TypeOpen, "stream": "non_durable", "reconnect_token": token,
		"previous_filter_groups": groups(typA), "filter_groups": groups(typB)})
	if f := o.ExpectError(http.StatusForbidden, true); strings.Contains(f.Message, token) {
		t.Fatalf("the error quotes the reconnect token: %+v", f)
	}
	o.ExpectFatalClose(http.StatusForbidden)

	// The token alone resumes: clients share a queue that way.
	o = Dial(t, h, h.OtherToken)
	if f := o.Open(map[string]any{"stream": "non_durable", "reconnect_token": token}); f.ReconnectToken != token {
		t.Fatalf("resume answers the same token: %+v", f)
	}
	o.Close()

	Publish(t, h, typB, 20, 1)
	Publish(t, h, typA, 0, 3)
	c.Demand(3)
	got := []int{}
	for _, f := range c.Events(3) {
		if f.Event.EventType != typA {
			t.Fatalf("the queue was re-filtered: got %s", f.Event.EventType)
		}
		got = append(got, N(t, f))
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("the owner receives every event: %v", got)
	}
	c.Quiet()
	c.Close()
}

// testDurableRedelivered: what a durable stream did not settle is
// delivered again on the next connection, one delivery count higher.
func testDurableRedelivered(t *testing.T, h *Harness) {
	typ, q := unique("ws.redeliver"), unique("ws-q-redeliver")
	CreateQueue(t, h, q, typ)
	Publish(t, h, typ, 0, 2)
	c := Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "durable", "queue_id": q})
	c.Demand(2)
	evs := c.Events(2)
	acked, kept := evs[0], evs[1]
	c.Send(map[string]any{"type": "ack", "id": "a", "delivery_tags": []int64{acked.DeliveryTag}})
	if s := c.Answer(wsframe.TypeSettled, "a"); *s.Acked != 1 {
		t.Fatalf("ack: %+v", s)
	}
	c.Close()

	c = Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "durable", "queue_id": q})
	c.Demand(5)
	f := c.Events(1)[0]
	if N(t, f) != N(t, kept) || f.DeliveryCount != 2 {
		t.Fatalf("want n %d again with delivery_count 2, got %+v", N(t, kept), f)
	}
	c.Send(map[string]any{"type": "ack", "id": "a", "delivery_tags": []int64{f.DeliveryTag}})
	if s := c.Answer(wsframe.TypeSettled, "a"); *s.Acked != 1 {
		t.Fatalf("ack: %+v", s)
	}
	c.Quiet()
	c.Close()
}

// testDeadLetters: events nacked DeliveryLimit times are dead-lettered;
// the dead_letters stream shows them with tags against demand; actions
// are answered one outcome each, in order: REPLAYED (the event is back on
// its queue), DISCARDED, LEFT, and LEFT with a detail for an unknown tag.
func testDeadLetters(t *testing.T, h *Harness) {
	typ, q := unique("ws.dlq"), unique("ws-q-dlq")
	CreateQueue(t, h, q, typ)
	Publish(t, h, typ, 0, 3)

	// Deliver each event DeliveryLimit times, nacking every delivery.
	c := Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "durable", "queue_id": q})
	c.Demand(3 * h.DeliveryLimit)
	for i := range 3 * h.DeliveryLimit {
		f := c.Events(1)[0]
		id := fmt.Sprintf("n-%d", i)
		c.Send(map[string]any{"type": "nack", "id": id, "delivery_tags": []int64{f.DeliveryTag}})
		if s := c.Answer(wsframe.TypeSettled, id); *s.Nacked != 1 {
			t.Fatalf("nack: %+v", s)
		}
	}
	// The next pull finds them past the limit and dead-letters them.
	c.Demand(1)

	d := Dial(t, h, h.Token)
	if f := d.Open(map[string]any{"stream": "dead_letters"}); f.ReconnectToken != "" || f.QueueID != "" {
		t.Fatalf("connected frame of dead_letters carries no token: %+v", f)
	}
	d.Demand(wsframe.MaxDemand)
	tags := map[int]int64{} // n → tag
	for len(tags) < 3 {
		f := d.Events(1)[0]
		if f.Type != wsframe.TypeDeadLetteredEvent {
			t.Fatalf("want dead_lettered_event, got %+v", f)
		}
		if f.OriginQueue != q {
			continue // another queue's dead letter
		}
		n := N(t, f)
		if _, dup := tags[n]; dup {
			t.Fatalf("dead letter %d shown twice", n)
		}
		if f.DeliveryTag < 1 || f.Reason != "DELIVERY_LIMIT" || f.DeliveryCount != int64(h.DeliveryLimit) ||
			f.DeadLetteredAt == nil || f.Event.EventType != typ || f.ResourceID == "" {
			t.Fatalf("dead letter: %+v", f)
		}
		tags[n] = f.DeliveryTag
	}
	c.Close() // the replayed event is read on a new connection

	d.Send(map[string]any{"type": "actions", "id": "act-1", "actions": []map[string]any{
		{"delivery_tag": tags[0], "action": "REPLAY"},
		{"delivery_tag": tags[1], "action": "ACTION_DISCARD"},
		{"delivery_tag": tags[2], "action": "LEAVE"},
		{"delivery_tag": 999999, "action": "REPLAY"},
	}})
	want := []struct {
		tag     int64
		outcome string
	}{{tags[0], "REPLAYED"}, {tags[1], "DISCARDED"}, {tags[2], "LEFT"}, {999999, "LEFT"}}
	for i, w := range want {
		o := d.Answer(wsframe.TypeOutcome, "act-1")
		if o.DeliveryTag != w.tag || o.Outcome != w.outcome {
			t.Fatalf("outcome %d: want tag %d %s, got %+v", i, w.tag, w.outcome, o)
		}
		if i == 3 && o.Detail == "" {
			t.Fatal("an unknown tag's outcome says why")
		}
	}
	d.Send(map[string]any{"type": "actions", "id": "act-2", "actions": []map[string]any{
		{"delivery_tag": tags[1], "action": "DISCARD"}, {"delivery_tag": tags[2], "action": "DISCARD"},
	}})
	if o := d.Answer(wsframe.TypeOutcome, "act-2"); o.Outcome != "LEFT" || o.Detail == "" {
		t.Fatalf("a discarded dead letter's tag is retired: %+v", o)
	}
	if o := d.Answer(wsframe.TypeOutcome, "act-2"); o.Outcome != "DISCARDED" {
		t.Fatalf("discard: %+v", o)
	}
	d.Close()

	// The replayed event is back on its queue.
	c = Dial(t, h, h.Token)
	c.Open(map[string]any{"stream": "durable", "queue_id": q})
	c.Demand(1)
	f := c.Events(1)[0]
	if N(t, f) != 0 {
		t.Fatalf("want the replayed event 0, got %+v", f)
	}
	c.Send(map[string]any{"type": "ack", "id": "a", "delivery_tags": []int64{f.DeliveryTag}})
	if s := c.Answer(wsframe.TypeSettled, "a"); *s.Acked != 1 {
		t.Fatalf("ack: %+v", s)
	}
	c.Close()
}

// testFrameErrors: frames that are not JSON, break a rule or do not fit
// the state are non-fatal error frames (400, 422, 409): the stream goes
// on.
func testFrameErrors(t *testing.T, h *Harness) {
	c := Dial(t, h, h.Token)
	c.Send(`{"type": "ack", "id": "early", "delivery_tags": [1]}`)
	if f := c.ExpectError(http.StatusConflict, false); f.ID != "early" {
		t.Fatalf("error frame echoes the id: %+v", f)
	}
	c.Send(`{not json`)
	c.ExpectError(http.StatusBadRequest, false)
	c.Send(`{"type": "launch", "id": "l1"}`)
	if f := c.ExpectError(http.StatusUnprocessableEntity, false); f.ID != "l1" {
		t.Fatalf("the error refusing a frame echoes its id: %+v", f)
	}
	c.Send(`{"type": "demand", "id": "d-str", "n": "5"}`)
	if f := c.ExpectError(http.StatusBadRequest, false); f.ID != "d-str" {
		t.Fatalf("the error refusing a malformed frame echoes its id: %+v", f)
	}

	typ := unique("ws.errors")
	c.Open(map[string]any{"stream": "non_durable", "filter_groups": groups(typ)})
	c.Send(`{"type": "demand", "n": 0}`)
	c.ExpectError(http.StatusUnprocessableEntity, false)
	c.Send(`{"type": "open", "id": "again", "stream": "non_durable"}`)
	c.ExpectError(http.StatusConflict, false)
	c.Send(`{"type": "ack", "delivery_tags": [1]}`)
	c.ExpectError(http.StatusConflict, false)
	c.Send(`{"type": "actions", "actions": [{"delivery_tag": 1, "action": "LEAVE"}]}`)
	c.ExpectError(http.StatusConflict, false)
	c.Send(`{"type": "extend", "id": "x-nd", "delivery_tags": [1], "seconds": 60}`)
	if f := c.ExpectError(http.StatusConflict, false); f.ID != "x-nd" {
		t.Fatalf("extend on a non-durable stream: %+v", f)
	}
	// Ranges and members of another frame type: 422, echoing the id.
	for id, frame := range map[string]string{
		"x0":   `{"type": "extend", "id": "x0", "delivery_tags": [1], "seconds": 0}`,
		"x601": `{"type": "extend", "id": "x601", "delivery_tags": [1], "seconds": 601}`,
		"xnos": `{"type": "extend", "id": "xnos", "delivery_tags": [1]}`,
		"nbig": `{"type": "nack", "id": "nbig", "delivery_tags": [1], "delay": 43201}`,
		"nneg": `{"type": "nack", "id": "nneg", "delivery_tags": [1], "delay": -1}`,
		"adly": `{"type": "ack", "id": "adly", "delivery_tags": [1], "delay": 5}`,
	} {
		c.Send(frame)
		if f := c.ExpectError(http.StatusUnprocessableEntity, false); f.ID != id {
			t.Fatalf("%s: want a 422 echoing its id, got %+v", frame, f)
		}
	}

	// Still streaming.
	Publish(t, h, typ, 0, 1)
	c.Demand(1)
	if f := c.Events(1)[0]; N(t, f) != 0 {
		t.Fatalf("event after errors: %+v", f)
	}
	c.Close()
}

// testOpenErrors: an open that fails ends the connection: a fatal error
// frame, then close 4000+status. A bad token is never quoted back.
func testOpenErrors(t *testing.T, h *Harness) {
	c := Dial(t, h, h.Token)
	c.Send(map[string]any{"type": "open", "id": "o", "stream": "durable", "queue_id": unique("ws-q-missing")})
	if f := c.ExpectError(http.StatusNotFound, true); f.ID != "o" {
		t.Fatalf("fatal error echoes the id: %+v", f)
	}
	c.ExpectFatalClose(http.StatusNotFound)

	const badToken = "secret token with spaces"
	c = Dial(t, h, h.Token)
	c.Send(map[string]any{"type": "open", "stream": "non_durable", "reconnect_token": badToken})
	f := c.ExpectError(http.StatusUnprocessableEntity, true)
	if b, _ := json.Marshal(f); strings.Contains(string(b), "secret") {
		t.Fatalf("the error frame quotes the token: %s", b)
	}
	c.ExpectFatalClose(http.StatusUnprocessableEntity)

	c = Dial(t, h, h.Token)
	c.Send(map[string]any{"type": "open", "stream": "non_durable", "reconnect_token": unique("nd-gone")})
	c.ExpectError(http.StatusNotFound, true)
	c.ExpectFatalClose(http.StatusNotFound)
}

// testUnauthenticated: without a token the upgrade is refused with a
// plain 401 and the JSON error body.
func testUnauthenticated(t *testing.T, h *Harness) {
	for _, token := range []string{"", "not-a-token"} {
		ws, res, err := h.Dial(t, token, nil)
		if err == nil {
			_ = ws.Close()
			t.Fatalf("token %q: the upgrade succeeded", token)
		}
		if res == nil || res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: want 401, got %s", token, status(res))
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		var e struct{ Code, Message string }
		if json.Unmarshal(body, &e) != nil || e.Code == "" || e.Message == "" {
			t.Fatalf("401 body is not the JSON error body: %s", body)
		}
	}
}

// testPermissionDenied: a principal without the stream's permission is
// refused at open: fatal 403, close 4403.
func testPermissionDenied(t *testing.T, h *Harness) {
	q := unique("ws-q-denied")
	CreateQueue(t, h, q, unique("ws.denied"))
	for _, open := range []map[string]any{
		{"type": "open", "stream": "non_durable"},
		{"type": "open", "stream": "durable", "queue_id": q},
		{"type": "open", "stream": "dead_letters"},
	} {
		c := Dial(t, h, h.LimitedToken)
		c.Send(open)
		c.ExpectError(http.StatusForbidden, true)
		c.ExpectFatalClose(http.StatusForbidden)
	}
}

// testWithheldEvents: a durable stream whose principal may not read some
// of the queue's events (ReaderToken) never gets them, and its pulls —
// more of them than the delivery limit, each meeting those events first —
// neither deliver nor dead-letter them: a principal that may read them
// gets them afterwards, in order, with delivery_count 1.
func testWithheldEvents(t *testing.T, h *Harness) {
	mine, other, q := unique("ws.readable.mine"), unique("ws.withheld.other"), unique("ws-q-withheld")
	rest(t, h, "POST", "/api/v1beta/queues/durable", map[string]any{"queue_id": q, "filter_groups": groups(mine, other)}, http.StatusCreated)
	Publish(t, h, other, 0, 2)

	c := Dial(t, h, h.ReaderToken)
	c.Open(map[string]any{"stream": "durable", "queue_id": q})
	for i := range h.DeliveryLimit + 3 {
		Publish(t, h, mine, 100+i, 1)
		c.Demand(1)
		f := c.Events(1)[0]
		if N(t, f) != 100+i || f.DeliveryCount != 1 {
			t.Fatalf("reader: want n %d with delivery_count 1, got %+v", 100+i, f)
		}
		id := fmt.Sprintf("a-%d", i)
		c.Send(map[string]any{"type": "ack", "id": id, "delivery_tags": []int64{f.DeliveryTag}})
		if s := c.Answer(wsframe.TypeSettled, id); *s.Acked != 1 {
			t.Fatalf("ack: %+v", s)
		}
	}
	c.Quiet()
	c.Close()

	a := Dial(t, h, h.Token)
	a.Open(map[string]any{"stream": "durable", "queue_id": q})
	a.Demand(2)
	evs := a.Events(2)
	tags := make([]int64, len(evs))
	for i, f := range evs {
		if N(t, f) != i || f.DeliveryCount != 1 {
			t.Fatalf("withheld event %d: want it now, in order, with delivery_count 1, got %+v", i, f)
		}
		tags[i] = f.DeliveryTag
	}
	a.Send(map[string]any{"type": "ack", "id": "a", "delivery_tags": tags})
	if s := a.Answer(wsframe.TypeSettled, "a"); *s.Acked != 2 {
		t.Fatalf("ack: %+v", s)
	}
	a.Quiet()
	a.Close()
}
