package rabbit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

func TestQueueName(t *testing.T) {
	require.Equal(t, "ex:herald-dc-1", queueName("ex", "herald-dc-1"))
	// Different deployments never share a queue.
	require.NotEqual(t, queueName("a", "b.c"), queueName("a.b", "c"))

	long := "herald-q-" + strings.Repeat("ü", 200)
	q := queueName("ex", long)
	require.LessOrEqual(t, len(q), maxQueueName)
	require.True(t, utf8.ValidString(q))
	require.True(t, strings.HasPrefix(q, "ex:herald-q-"), "keeps a readable head")
	require.Equal(t, q, queueName("ex", long), "deterministic")
	require.NotEqual(t, q, queueName("ex", long+"x"), "the hash covers the whole name")
	for _, x := range filterExchanges(q) {
		require.LessOrEqual(t, len(x), 255, "filter exchange names fit RabbitMQ's limit")
	}
}

func TestBindingKeys(t *testing.T) {
	for _, tc := range []struct {
		groups filter.Groups
		want   []string
	}{
		{nil, []string{"#"}},
		{filter.Groups{{EventType: "a.b"}}, []string{"a.b"}},
		{filter.Groups{
			{EventType: "a.b", Filters: []filter.ResourceFilter{{FilterType: filter.Eq, ResourceID: "/x"}}},
			{EventType: "c"},
			{EventType: "a.b", Filters: []filter.ResourceFilter{{FilterType: filter.StartsWithLazy, ResourceID: "/y/"}}},
		}, []string{"a.b", "c"}},
	} {
		require.Equal(t, tc.want, bindingKeys(tc.groups))
	}
}

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want herr.Code
	}{
		{&amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no queue"}, herr.NotFound},
		{&amqp.Error{Code: amqp.PreconditionFailed}, herr.FailedPrecondition},
		{&amqp.Error{Code: amqp.ResourceLocked}, herr.FailedPrecondition},
		{&amqp.Error{Code: amqp.ContentTooLarge}, herr.InvalidArgument},
		{amqp.ErrClosed, herr.Unavailable},
		{amqp.ErrCredentials, herr.Unavailable},
		{amqp.ErrChannelMax, herr.Unavailable},
		{&amqp.Error{Code: amqp.ConnectionForced}, herr.Unavailable},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, herr.Unavailable},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), herr.Unavailable},
		{context.Canceled, herr.Canceled},
		{context.DeadlineExceeded, herr.DeadlineExceeded},
		{errors.New("something else"), herr.Unknown},
	} {
		require.Equal(t, tc.want.String(), codeOf(tc.err).String(), "%v", tc.err)
	}
	// wrap never leaves a driver error uncoded.
	require.Equal(t, herr.Unavailable, herr.CodeOf(wrap(errors.New("odd"), "op")))
	require.Equal(t, herr.NotFound, herr.CodeOf(wrap(&amqp.Error{Code: amqp.NotFound}, "op")))
}
