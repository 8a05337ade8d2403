package wsframe_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/herr"
)

func TestDecodeAccepts(t *testing.T) {
	for name, tc := range map[string]struct {
		frame string
		check func(t *testing.T, f *wsframe.ClientFrame)
	}{
		"open non-durable with filters": {
			`{"type":"open","stream":"non_durable","filter_groups":[{"event_type":"orders.created"}]}`,
			func(t *testing.T, f *wsframe.ClientFrame) {
				r := f.StreamRequest()
				assert.Equal(t, delivery.NonDurable, r.Kind)
				assert.Empty(t, r.ReconnectToken)
				require.Len(t, r.FilterGroups, 1)
				assert.Equal(t, "orders.created", r.FilterGroups[0].EventType)
			},
		},
		"open non-durable with token and previous filters": {
			`{"type":"open","stream":"non_durable","reconnect_token":"nd-1","filter_groups":[],"previous_filter_groups":[{"event_type":"a"}]}`,
			func(t *testing.T, f *wsframe.ClientFrame) {
				r := f.StreamRequest()
				assert.Equal(t, "nd-1", r.ReconnectToken)
				assert.Equal(t, "reconnect_token", r.TokenField)
				assert.True(t, r.FilterUpdate)
			},
		},
		"token alone resumes without a filter update": {
			`{"type":"open","stream":"non_durable","reconnect_token":"nd-1"}`,
			func(t *testing.T, f *wsframe.ClientFrame) { assert.False(t, f.StreamRequest().FilterUpdate) },
		},
		"open durable": {
			`{"type":"open","stream":"durable","queue_id":"orders-v1","id":"c1"}`,
			func(t *testing.T, f *wsframe.ClientFrame) {
				r := f.StreamRequest()
				assert.Equal(t, delivery.Durable, r.Kind)
				assert.Equal(t, "orders-v1", r.QueueID)
				assert.Equal(t, "c1", f.ID)
			},
		},
		"open dead letters": {`{"type":"open","stream":"dead_letters"}`, nil},
		"demand at the limit": {
			`{"type":"demand","n":1000}`,
			func(t *testing.T, f *wsframe.ClientFrame) { assert.Equal(t, wsframe.MaxDemand, f.N) },
		},
		"ack": {
			`{"type":"ack","delivery_tags":[1,2,3]}`,
			func(t *testing.T, f *wsframe.ClientFrame) { assert.Equal(t, []int64{1, 2, 3}, f.DeliveryTags) },
		},
		"nack": {`{"type":"nack","delivery_tags":[7]}`, nil},
		"nack with the longest delay": {
			`{"type":"nack","delivery_tags":[7],"delay":43200}`,
			func(t *testing.T, f *wsframe.ClientFrame) { assert.Equal(t, wsframe.MaxNackDelaySeconds, *f.Delay) },
		},
		"nack with delay 0":                         {`{"type":"nack","delivery_tags":[7],"delay":0}`, nil},
		"extend, the shortest":                      {`{"type":"extend","delivery_tags":[1,2],"seconds":1}`, nil},
		"extend, the longest":                       {`{"type":"extend","delivery_tags":[1],"seconds":600}`, nil},
		"actions in the notifications API spelling": {`{"type":"actions","actions":[{"delivery_tag":1,"action":"ACTION_REPLAY"},{"delivery_tag":2,"action":"discard"}]}`, nil},
		"ping": {`{"type":"ping","id":"p-1"}`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := wsframe.Decode([]byte(tc.frame))
			require.NoError(t, err)
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	longID := strings.Repeat("x", wsframe.MaxIDLength+1)
	tags := make([]int64, wsframe.MaxTags+1)
	for i := range tags {
		tags[i] = int64(i + 1)
	}
	manyTags, _ := json.Marshal(map[string]any{"type": "ack", "delivery_tags": tags})
	for name, tc := range map[string]struct {
		frame string
		code  herr.Code
		says  string
	}{
		"not JSON":                      {`{"type":`, herr.Malformed, "cut short"},
		"an array":                      {`[1]`, herr.Malformed, "JSON object"},
		"two objects":                   {`{"type":"ping"}{"type":"ping"}`, herr.Malformed, "exactly one"},
		"unknown member":                {`{"type":"ping","bogus":1}`, herr.Malformed, "unknown field \"bogus\""},
		"wrong member type":             {`{"type":"demand","n":"5"}`, herr.Malformed, "n"},
		"no type":                       {`{}`, herr.InvalidArgument, "type is required"},
		"unknown type":                  {`{"type":"subscribe"}`, herr.InvalidArgument, "type must be"},
		"no stream":                     {`{"type":"open"}`, herr.InvalidArgument, "stream is required"},
		"unknown stream":                {`{"type":"open","stream":"fanout"}`, herr.InvalidArgument, "stream must be"},
		"durable without queue":         {`{"type":"open","stream":"durable"}`, herr.InvalidArgument, "queue_id"},
		"bad queue id":                  {`{"type":"open","stream":"durable","queue_id":"a b"}`, herr.InvalidArgument, "queue_id"},
		"empty token":                   {`{"type":"open","stream":"non_durable","reconnect_token":""}`, herr.InvalidArgument, "reconnect_token"},
		"bad filter type":               {`{"type":"open","stream":"non_durable","filter_groups":[{"event_type":"a","filters":[{"filter_type":"regex","resource_id":"x"}]}]}`, herr.InvalidArgument, "filter"},
		"demand zero":                   {`{"type":"demand","n":0}`, herr.InvalidArgument, "n must be"},
		"demand over the limit":         {`{"type":"demand","n":1001}`, herr.InvalidArgument, "n must be"},
		"ack without tags":              {`{"type":"ack","delivery_tags":[]}`, herr.InvalidArgument, "delivery_tags"},
		"ack with too many tags":        {string(manyTags), herr.InvalidArgument, "delivery_tags"},
		"extend without seconds":        {`{"type":"extend","delivery_tags":[1]}`, herr.InvalidArgument, "seconds must be an integer from 1 to 600"},
		"extend zero seconds":           {`{"type":"extend","delivery_tags":[1],"seconds":0}`, herr.InvalidArgument, "seconds must be"},
		"extend past 600 s":             {`{"type":"extend","delivery_tags":[1],"seconds":601}`, herr.InvalidArgument, "seconds must be"},
		"extend fractional seconds":     {`{"type":"extend","delivery_tags":[1],"seconds":1.5}`, herr.Malformed, "seconds"},
		"extend without tags":           {`{"type":"extend","delivery_tags":[],"seconds":10}`, herr.InvalidArgument, "delivery_tags"},
		"nack negative delay":           {`{"type":"nack","delivery_tags":[1],"delay":-1}`, herr.InvalidArgument, "delay must be an integer from 0 to 43200 seconds"},
		"nack delay past 12 h":          {`{"type":"nack","delivery_tags":[1],"delay":43201}`, herr.InvalidArgument, "delay must be"},
		"delay on an ack":               {`{"type":"ack","delivery_tags":[1],"delay":5}`, herr.InvalidArgument, "delay applies to nack frames only"},
		"delay on an extend":            {`{"type":"extend","delivery_tags":[1],"seconds":5,"delay":5}`, herr.InvalidArgument, "delay applies to nack frames only"},
		"seconds on a nack":             {`{"type":"nack","delivery_tags":[1],"seconds":5}`, herr.InvalidArgument, "seconds applies to extend frames only"},
		"retryAfter on a nack":          {`{"type":"nack","delivery_tags":[1],"retryAfter":5}`, herr.Malformed, "unknown field \"retryAfter\""},
		"no actions":                    {`{"type":"actions","actions":[]}`, herr.InvalidArgument, "actions"},
		"unknown action":                {`{"type":"actions","actions":[{"delivery_tag":1,"action":"ARCHIVE"}]}`, herr.InvalidArgument, "actions[0].action"},
		"filters on a durable stream":   {`{"type":"open","stream":"durable","queue_id":"q","filter_groups":[]}`, herr.InvalidArgument, "filter_groups does not apply to a durable stream"},
		"queue on a non-durable stream": {`{"type":"open","stream":"non_durable","queue_id":"q"}`, herr.InvalidArgument, "queue_id does not apply"},
		"token on dead letters":         {`{"type":"open","stream":"dead_letters","reconnect_token":"t"}`, herr.InvalidArgument, "reconnect_token does not apply"},
		"id too long":                   {`{"type":"ping","id":"` + longID + `"}`, herr.InvalidArgument, "id must be"},
		"id with control char":          {`{"type":"ping","id":"a\u0001"}`, herr.InvalidArgument, "id must be"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := wsframe.Decode([]byte(tc.frame))
			require.Error(t, err)
			assert.Equal(t, tc.code, herr.CodeOf(err), herr.MessageOf(err))
			assert.Contains(t, herr.MessageOf(err), tc.says)
		})
	}
}

// A refused token is never quoted back, and an unknown member's name is
// bounded, since both are the client's own text.
func TestDecodeDoesNotEchoClientText(t *testing.T) {
	secret := "tok\u0007en-that-must-not-appear"
	_, err := wsframe.Decode([]byte(`{"type":"open","stream":"non_durable","reconnect_token":"` + secret + `"}`))
	require.Error(t, err)
	assert.NotContains(t, herr.MessageOf(err), "must-not-appear")

	long := strings.Repeat("m", 5000)
	_, err = wsframe.Decode([]byte(`{"type":"ping","` + long + `":1}`))
	require.Error(t, err)
	assert.Less(t, len(herr.MessageOf(err)), 200)
}

func TestServerFrames(t *testing.T) {
	assert.JSONEq(t, `{"type":"connected","stream":"non_durable","reconnect_token":"nd-1","message":"Connection established"}`,
		string(wsframe.Connected("", wsframe.StreamNonDurable, "nd-1").Encode()))
	assert.JSONEq(t, `{"type":"connected","id":"o","stream":"durable","queue_id":"q","message":"Connection established"}`,
		string(wsframe.Connected("o", wsframe.StreamDurable, "q").Encode()))
	assert.JSONEq(t, `{"type":"settled","id":"a","acked":2,"nacked":0,"skipped":1}`,
		string(wsframe.Settled("a", delivery.SettleReport{Acked: 2, Skipped: 1}).Encode()))
	assert.JSONEq(t, `{"type":"extended","id":"e","extended":2,"skipped":0,"capped":1}`,
		string(wsframe.Extended("e", delivery.ExtendReport{Extended: 2, Capped: 1}).Encode()))
	assert.JSONEq(t, `{"type":"idle","unmet":0}`, string(wsframe.Idle(0).Encode()))

	// An internal error shows the caller-safe message, never its cause.
	e := wsframe.Error("x", herr.Wrap(herr.Internal, assert.AnError, "the store failed"), true)
	assert.JSONEq(t, `{"type":"error","id":"x","status_code":500,"code":"internal","message":"the store failed","fatal":true}`, string(e.Encode()))
	assert.Equal(t, 4404, wsframe.CloseCode(404))

	// A non-durable event carries no tag; a durable one does.
	ev := &delivery.ConsumerEvent{EventType: "a", Message: json.RawMessage(`{"k":1}`)}
	var got map[string]any
	require.NoError(t, json.Unmarshal(wsframe.Event(delivery.Delivery{DeliveryCount: 1, Event: ev}, 0).Encode(), &got))
	assert.NotContains(t, got, "delivery_tag")
	require.NoError(t, json.Unmarshal(wsframe.Event(delivery.Delivery{DeliveryCount: 2, Event: ev}, 9).Encode(), &got))
	assert.EqualValues(t, 9, got["delivery_tag"])
	assert.EqualValues(t, 2, got["delivery_count"])
}

// A refused frame keeps its id, so that the error frame can echo it; an
// invalid id is dropped.
func TestDecodeKeepsTheIDOfARefusedFrame(t *testing.T) {
	for frame, want := range map[string]*wsframe.ClientFrame{
		`{"type":"demand","id":"dz","n":0}`:                                   {Type: "demand", ID: "dz"},
		`{"type":"bogus","id":"b1"}`:                                          {Type: "bogus", ID: "b1"},
		`{"type":"open","id":"o","stream":"durable","queue_id":"a b"}`:        {Type: "open", ID: "o"},
		`{"type":"demand","id":"dstr","n":"5"}`:                               {ID: "dstr"},
		`{"type":"demand","id":"extra","n":1,"foo":1}`:                        {ID: "extra"},
		`{"type":"open","id":"fg","stream":"non_durable","filter_groups":{}}`: {ID: "fg"},
	} {
		f, err := wsframe.Decode([]byte(frame))
		require.Error(t, err, frame)
		assert.Equal(t, want, f, frame)
	}
	for _, frame := range []string{`{"type":`, `{"type":"ping","id":"` + strings.Repeat("i", 65) + `"}`, `{"type":"demand","id":7,"n":0}`} {
		f, err := wsframe.Decode([]byte(frame))
		require.Error(t, err, frame)
		assert.Nil(t, f, frame)
	}
}
