package wsframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/herr"
)

// recorder is a wsframe.Conn that notes what Dispatch called.
type recorder struct {
	stream string
	calls  []string
	ids    []string
	errs   []error
}

func (r *recorder) Stream() string { return r.stream }
func (r *recorder) note(call string, f *wsframe.ClientFrame) {
	r.calls = append(r.calls, call)
	r.ids = append(r.ids, f.ID)
}
func (r *recorder) Open(_ context.Context, f *wsframe.ClientFrame)   { r.note("open", f) }
func (r *recorder) Demand(_ context.Context, f *wsframe.ClientFrame) { r.note("demand", f) }
func (r *recorder) Settle(_ context.Context, f *wsframe.ClientFrame) { r.note("settle", f) }
func (r *recorder) Extend(_ context.Context, f *wsframe.ClientFrame) { r.note("extend", f) }
func (r *recorder) Act(_ context.Context, f *wsframe.ClientFrame)    { r.note("act", f) }
func (r *recorder) Ping(_ context.Context, f *wsframe.ClientFrame)   { r.note("ping", f) }
func (r *recorder) Refuse(_ context.Context, id string, err error) {
	r.calls, r.ids, r.errs = append(r.calls, "refuse"), append(r.ids, id), append(r.errs, err)
}
func (r *recorder) Fail(_ context.Context, id string, err error) {
	r.calls, r.ids, r.errs = append(r.calls, "fail"), append(r.ids, id), append(r.errs, err)
}

// TestDispatch: every frame reaches the method of its type only when it
// fits the connection's state; otherwise the shared error is sent, fatal
// only for an open that cannot open.
func TestDispatch(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		stream, frame string
		call          string
		code          herr.Code
		message       string
	}{
		"open":                  {"", `{"type":"open","id":"o","stream":"dead_letters"}`, "open", 0, ""},
		"second open":           {"durable", `{"type":"open","id":"o","stream":"dead_letters"}`, "refuse", herr.FailedPrecondition, wsframe.ErrAlreadyOpen.Error()},
		"second malformed open": {"durable", `{"type":"open","id":"o","stream":"nope"}`, "refuse", herr.FailedPrecondition, wsframe.ErrAlreadyOpen.Error()},
		"malformed open":        {"", `{"type":"open","id":"o","stream":"nope"}`, "fail", herr.InvalidArgument, ""},
		"not JSON":              {"durable", `{nope`, "refuse", herr.Malformed, ""},
		"bad demand":            {"durable", `{"type":"demand","id":"d","n":0}`, "refuse", herr.InvalidArgument, ""},
		"ping before open":      {"", `{"type":"ping","id":"p"}`, "ping", 0, ""},
		"demand before open":    {"", `{"type":"demand","id":"d","n":1}`, "refuse", herr.FailedPrecondition, "send an open frame first"},
		"ack before open":       {"", `{"type":"ack","id":"a","delivery_tags":[1]}`, "refuse", herr.FailedPrecondition, "send an open frame first"},
		"actions before open":   {"", `{"type":"actions","id":"x","actions":[{"delivery_tag":1,"action":"LEAVE"}]}`, "refuse", herr.FailedPrecondition, "send an open frame first"},
		"demand":                {"dead_letters", `{"type":"demand","id":"d","n":1}`, "demand", 0, ""},
		"ack":                   {"durable", `{"type":"ack","id":"a","delivery_tags":[1]}`, "settle", 0, ""},
		"nack":                  {"durable", `{"type":"nack","id":"a","delivery_tags":[1]}`, "settle", 0, ""},
		"ack non-durable":       {"non_durable", `{"type":"ack","id":"a","delivery_tags":[1]}`, "refuse", herr.FailedPrecondition, "only a durable stream's events are settled: ack frames do not apply to a non_durable stream"},
		"extend":                {"durable", `{"type":"extend","id":"e","delivery_tags":[1],"seconds":60}`, "extend", 0, ""},
		"delayed nack":          {"durable", `{"type":"nack","id":"n","delivery_tags":[1],"delay":30}`, "settle", 0, ""},
		"extend before open":    {"", `{"type":"extend","id":"e","delivery_tags":[1],"seconds":60}`, "refuse", herr.FailedPrecondition, "send an open frame first"},
		"extend non-durable":    {"non_durable", `{"type":"extend","id":"e","delivery_tags":[1],"seconds":60}`, "refuse", herr.FailedPrecondition, "only a durable stream's events are settled: extend frames do not apply to a non_durable stream"},
		"extend dead letters":   {"dead_letters", `{"type":"extend","id":"e","delivery_tags":[1],"seconds":60}`, "refuse", herr.FailedPrecondition, ""},
		"bad extend":            {"durable", `{"type":"extend","id":"e","delivery_tags":[1],"seconds":601}`, "refuse", herr.InvalidArgument, "seconds must be an integer from 1 to 600"},
		"actions":               {"dead_letters", `{"type":"actions","id":"x","actions":[{"delivery_tag":1,"action":"LEAVE"}]}`, "act", 0, ""},
		"actions on events":     {"durable", `{"type":"actions","id":"x","actions":[{"delivery_tag":1,"action":"LEAVE"}]}`, "refuse", herr.FailedPrecondition, "actions frames apply to a dead_letters stream only"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := &recorder{stream: tc.stream}
			f, err := wsframe.Decode([]byte(tc.frame))
			wsframe.Dispatch(t.Context(), r, f, err)
			require.Equal(t, []string{tc.call}, r.calls)
			if f != nil {
				require.Equal(t, f.ID, r.ids[0], "the frame's id is echoed")
			}
			if tc.call != "refuse" && tc.call != "fail" {
				require.Empty(t, r.errs)
				return
			}
			require.Equal(t, tc.code, herr.CodeOf(r.errs[0]), "%v", r.errs[0])
			if tc.message != "" {
				require.Equal(t, tc.message, herr.MessageOf(r.errs[0]))
			}
		})
	}
}

// TestSettlement: an ack frame's tags are acks, a nack frame's nacks.
func TestSettlement(t *testing.T) {
	t.Parallel()
	acks, nacks := (&wsframe.ClientFrame{Type: wsframe.TypeAck, DeliveryTags: []int64{1, 2}}).Settlement()
	require.Equal(t, []int64{1, 2}, acks)
	require.Nil(t, nacks)
	acks, nacks = (&wsframe.ClientFrame{Type: wsframe.TypeNack, DeliveryTags: []int64{3}}).Settlement()
	require.Nil(t, acks)
	require.Equal(t, []int64{3}, nacks)
}

// TestNackDelayAndExtendBy: a nack frame's delay and an extend frame's
// seconds, as durations; absent is nil (the queue's retry policy).
func TestNackDelayAndExtendBy(t *testing.T) {
	t.Parallel()
	f, err := wsframe.Decode([]byte(`{"type":"nack","delivery_tags":[1],"delay":30}`))
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, *f.NackDelay())
	f, err = wsframe.Decode([]byte(`{"type":"nack","delivery_tags":[1],"delay":0}`))
	require.NoError(t, err)
	require.Equal(t, time.Duration(0), *f.NackDelay(), "a delay of 0 is given, not absent")
	f, err = wsframe.Decode([]byte(`{"type":"nack","delivery_tags":[1]}`))
	require.NoError(t, err)
	require.Nil(t, f.NackDelay())
	f, err = wsframe.Decode([]byte(`{"type":"extend","delivery_tags":[1],"seconds":600}`))
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, f.ExtendBy())
	require.Nil(t, f.NackDelay())
}

// TestTriageActions: an actions frame's actions, in order, in delivery's
// terms (the ACTION_ spelling too).
func TestTriageActions(t *testing.T) {
	t.Parallel()
	f, err := wsframe.Decode([]byte(`{"type":"actions","actions":[{"delivery_tag":2,"action":"ACTION_REPLAY"},{"delivery_tag":1,"action":"discard"}]}`))
	require.NoError(t, err)
	require.Equal(t, []delivery.TriageAction{
		{DeliveryTag: 2, Action: delivery.ActionReplay},
		{DeliveryTag: 1, Action: delivery.ActionDiscard},
	}, f.TriageActions())
}
