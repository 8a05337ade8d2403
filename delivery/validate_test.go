package delivery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/strictjson"
)

func TestValidateQueueID(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "myapp-uploads-queue", "A.b_c-9", strings.Repeat("x", 200)} {
		require.NoError(t, delivery.ValidateQueueID(ok), ok)
	}
	for _, bad := range []string{"", " ", "a b", strings.Repeat("x", 201), "a/b", "ü", "a\n", "a:b"} {
		err := delivery.ValidateQueueID(bad)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%q", bad)
		require.Contains(t, herr.MessageOf(err), "queue_id")
	}
}

func TestValidateReconnectToken(t *testing.T) {
	t.Parallel()
	require.NoError(t, delivery.ValidateReconnectToken("f", "!"))
	require.NoError(t, delivery.ValidateReconnectToken("f", "~"+strings.Repeat("A", 199)))
	for _, bad := range []string{"", "SECRET" + " ", "SECRET\x00", "SECRET\x7f", "SECRETé", "SECRET" + strings.Repeat("A", 195), "SECRET\t"} {
		err := delivery.ValidateReconnectToken("Last-Event-ID", bad)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%q", bad)
		msg := herr.MessageOf(err)
		require.Contains(t, msg, "Last-Event-ID")
		require.Contains(t, msg, "1 to 200 printable ASCII")
		require.NotContains(t, msg, "SECRET")
	}
}

func TestSameGroups(t *testing.T) {
	t.Parallel()
	a := filter.Groups{
		{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: filter.Eq, ResourceID: "/x"}, {FilterType: filter.StartsWithLazy, ResourceID: "/y/"}}},
		{EventType: "b"},
	}
	b := filter.Groups{
		{EventType: "b", Filters: []filter.ResourceFilter{}},
		{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: filter.StartsWithLazy, ResourceID: "/y/"}, {FilterType: filter.Unspecified, ResourceID: "/x"}}},
	}
	require.True(t, delivery.SameGroups(a, b), "order and unspecified=eq do not matter")
	require.True(t, delivery.SameGroups(nil, filter.Groups{}))
	require.False(t, delivery.SameGroups(a, b[:1]))
	require.False(t, delivery.SameGroups(filter.Groups{{EventType: "a"}}, filter.Groups{{EventType: "a", Filters: []filter.ResourceFilter{{FilterType: filter.StartsWithGreedy}}}}))
	require.False(t, delivery.SameGroups(nil, filter.Groups{{EventType: "a"}}))
}

func TestDecodeConsumerEvent(t *testing.T) {
	t.Parallel()
	body := `{"specversion":"1.0","id":"x","source":"/h","type":"myapp.user.created","subject":"/users/1",` +
		`"time":"2024-10-16T14:30:00Z","publishedat":"2024-10-16T14:30:01.5Z","principalidentity":"billing",` +
		`"datacontenttype":"application/json","data":{"user_id":"123"}}`
	e, err := delivery.DecodeConsumerEvent([]byte(body))
	require.NoError(t, err)
	require.Equal(t, "myapp.user.created", e.EventType)
	require.Equal(t, "billing", e.PrincipalIdentity)
	require.True(t, e.OccurredAt.Equal(time.Date(2024, 10, 16, 14, 30, 0, 0, time.UTC)))
	require.True(t, e.PublishedAt.Equal(time.Date(2024, 10, 16, 14, 30, 1, 500_000_000, time.UTC)))
	require.JSONEq(t, `{"user_id":"123"}`, string(e.Message))
	require.Equal(t, "/users/1", e.Resource.ResourceID)
	require.Equal(t, "x", e.ID)
	require.True(t, e.MessageChecked(), "an event as Publish stores it is read in one pass, its message checked")
	escaped, err := delivery.DecodeConsumerEvent([]byte(strings.Replace(body, "myapp.user.created", `myapp.user.cr\u0065ated`, 1)))
	require.NoError(t, err)
	require.Equal(t, "myapp.user.created", escaped.EventType)
	require.False(t, escaped.MessageChecked(), "the lenient decoder checks no message")

	_, err = delivery.DecodeConsumerEvent([]byte(`not json`))
	require.Equal(t, herr.Internal, herr.CodeOf(err))
	e, err = delivery.DecodeConsumerEvent([]byte(`{"type":"a","time":"2024-10-16T14:30:00Z"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(e.Message), "no data is an empty message")
}

func TestResourceIDControlCharacters(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"/users/123", "/dépôt/ü", "/a b", "/\u00a0nbsp", "/emoji/\U0001F600"} {
		e := delivery.Event{EventType: "a", ResourceID: ok}
		require.NoError(t, e.Validate(), "%q", ok)
	}
	for _, bad := range []string{"/a\x00", "/a\n", "/a\x7f", "/a\u0085", "/a\u009f"} {
		e := delivery.Event{EventType: "a", ResourceID: bad}
		err := e.Validate()
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%q", bad)
		require.Contains(t, herr.MessageOf(err), "control characters")
	}
}

// TestMessageNumberRange: a message's numbers must be doubles (RFC 7493,
// I-JSON): overflow (1e400, a 400-digit integer) and the underflow of a
// nonzero number to 0 (1e-400) are refused naming the message; zero,
// the extremes of the range and long numbers within it pass (precision
// may be lost, range may not). The check is the same whether the
// transport scanned the message already (ValidateScanned) or not.
func TestMessageNumberRange(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"1e400", "-1e400", "1e-400", "-2.4e-324", "1" + strings.Repeat("0", 399), "0." + strings.Repeat("0", 400) + "1"} {
		e := delivery.Event{EventType: "a.b", Message: []byte(`{"x":{"n":[` + n + `]}}`)}
		err := e.Validate()
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%.30s", n)
		require.Contains(t, herr.MessageOf(err), "outside the range of an IEEE 754 double", "%.30s", n)
		require.Equal(t, []any{"message"}, herr.FieldOf(err))
		e = delivery.Event{EventType: "a.b", Message: []byte(`{"x":{"n":[` + n + `]}}`)}
		require.Error(t, e.ValidateScanned(strictjson.Scan{}), "%.30s", n)
	}
	for _, n := range []string{"0", "-0.0e999", "1.7976931348623157e308", "5e-324", "1" + strings.Repeat("0", 300), "123.5e-7"} {
		e := delivery.Event{EventType: "a.b", Message: []byte(`{"n":` + n + `}`)}
		require.NoError(t, e.Validate(), "%.30s", n)
	}
}
