package wslambda_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wslambda"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local/apigwws"
)

// TestMalformedSecondOpen: an open frame Decode refuses, on a connection
// whose stream is open, is a non-fatal 409 like any second open.
func TestMalformedSecondOpen(t *testing.T) {
	t.Parallel()
	s := startStack(t, 5, apigwws.Options{})
	createQueue(t, s, "q-open2", "o.x")
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-open2"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	c.send(`{"type":"open","id":"o2","stream":"durable","queue_id":"not a valid id!"}`)
	f := c.next()
	require.Equal(t, wsframe.TypeError, f.Type)
	require.False(t, f.Fatal, "%+v", f)
	require.Equal(t, http.StatusConflict, f.StatusCode)
	require.Equal(t, "o2", f.ID)
	c.send(`{"type":"ping","id":"p"}`)
	require.Equal(t, wsframe.TypePong, c.next().Type, "the stream goes on")
}

// TestLogsKeepTokensOut: a stream failure's log line names a non-durable
// queue by a prefix of its id (its reconnect token), also where the
// failure's cause quotes it; and a lost session logged end to end does
// not print the token either.
func TestLogsKeepTokensOut(t *testing.T) {
	t.Parallel()
	const secret = "nd-0123456789abcdef-secret-token"
	var buf testkit.SyncBuffer
	h := wslambda.New(wslambda.Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	st := &wslambda.State{Stream: wsframe.StreamNonDurable, Session: &delivery.SessionState{Kind: delivery.NonDurable, Queue: secret, Session: "s"}}
	cause := fmt.Errorf("store: consumer %q: %w", secret, errors.New("boom"))
	p := &fakePoster{}
	wslambda.LogFatal(t.Context(), h, p, "conn1", st, herr.Wrap(herr.Internal, cause, "internal error"))
	out := buf.String()
	require.Contains(t, out, "websocket stream failed")
	require.Contains(t, out, delivery.RedactQueue(delivery.NonDurable, secret))
	require.Contains(t, out, "boom", "the cause is logged, without the token")
	require.NotContains(t, out, secret)
	require.Len(t, p.posts, 1)
	require.NotContains(t, string(p.posts[0]), secret)

	// End to end: the session is taken away; the next demand is fatal and
	// logged.
	s := startStack(t, 5, apigwws.Options{})
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"non_durable","filter_groups":[{"event_type":"log.x"}]}`)
	f := c.next()
	require.Equal(t, wsframe.TypeConnected, f.Type)
	tok := f.ReconnectToken
	require.NotEmpty(t, tok)
	sess := s.state(t, s.onlyConnection(t)).Session
	require.NoError(t, s.app.Service().CloseSession(t.Context(), sess))
	c.send(`{"type":"demand","n":1}`)
	f = c.next()
	require.True(t, f.Fatal, "%+v", f)
	logs := s.logs.String()
	require.Contains(t, logs, "websocket stream failed")
	require.Contains(t, logs, "queue="+delivery.RedactQueue(delivery.NonDurable, tok))
	require.NotContains(t, logs, tok)
}

// TestLostSession: only a gone queue or a cancelled consumer end the
// stream; other internal errors do not.
func TestLostSession(t *testing.T) {
	t.Parallel()
	require.True(t, wslambda.Lost(herr.New(herr.NotFound, "queue gone")))
	require.True(t, wslambda.Lost(&delivery.ConsumerCancelledError{Err: errors.New("detached")}))
	require.False(t, wslambda.Lost(herr.New(herr.Internal, delivery.ConsumerCancelledMessage)), "matched by type, not by message")
	require.False(t, wslambda.Lost(herr.New(herr.Internal, "cannot encode the connection state")))
	require.False(t, wslambda.Lost(herr.New(herr.Unavailable, "try again")))
}
