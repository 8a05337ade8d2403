package wslambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wslambda"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var root = &auth.Principal{ID: "dev", Permissions: []string{"*"}}

func createQueue(t *testing.T, s *stack, id, typ string) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.rest.URL+"/api/v1beta/queues/durable",
		bytesReader(fmt.Appendf(nil, `{"queue_id":%q,"filter_groups":[{"event_type":%q}]}`, id, typ)))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
}

// answer is what the frames answering one demand were.
type answer struct {
	events []wsframe.ServerFrame
	errors []wsframe.ServerFrame
	unmet  int // -1: no idle
}

// untilIdle reads frames until an idle frame, or until n events came
// (then no idle is expected; the next frame, if any, is not read).
func (c *client) untilIdle(n int) answer {
	c.t.Helper()
	a := answer{unmet: -1}
	for len(a.events) < n {
		f := c.next()
		switch f.Type {
		case wsframe.TypeEvent, wsframe.TypeDeadLetteredEvent:
			a.events = append(a.events, f)
		case wsframe.TypeError:
			a.errors = append(a.errors, f)
		case wsframe.TypeIdle:
			a.unmet = *f.Unmet
			return a
		default:
			c.t.Fatalf("unexpected frame %+v", f)
		}
	}
	return a
}

func (s *stack) state(t *testing.T, id string) *wslambda.State {
	t.Helper()
	rec, err := s.app.Store().GetConnection(t.Context(), id)
	require.NoError(t, err)
	var st wslambda.State
	require.NoError(t, json.Unmarshal(rec.Data, &st))
	return &st
}

func (s *stack) onlyConnection(t *testing.T) string {
	t.Helper()
	ids := s.emu.Connections()
	require.Len(t, ids, 1)
	return ids[0]
}

func dialToken(t *testing.T, s *stack) *client {
	return dial(t, s, "", http.Header{"Authorization": {"Bearer " + token}})
}

// fakePoster records posts.
type fakePoster struct {
	mu    sync.Mutex
	posts [][]byte
}

func (p *fakePoster) PostToConnection(_ context.Context, _ string, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts = append(p.posts, data)
	return nil
}
func (p *fakePoster) DeleteConnection(context.Context, string) error { return nil }

func message(id, body, reqID string) events.APIGatewayWebsocketProxyRequest {
	return events.APIGatewayWebsocketProxyRequest{
		Body: body,
		RequestContext: events.APIGatewayWebsocketProxyRequestContext{
			EventType: "MESSAGE", RouteKey: "$default", ConnectionID: id, Stage: "local", RequestID: reqID,
		},
	}
}

func lifecycle(id, typ string) events.APIGatewayWebsocketProxyRequest {
	route := map[string]string{"CONNECT": "$connect", "DISCONNECT": "$disconnect"}[typ]
	return events.APIGatewayWebsocketProxyRequest{
		Headers: map[string]string{"Authorization": "Bearer " + token},
		RequestContext: events.APIGatewayWebsocketProxyRequestContext{
			EventType: typ, RouteKey: route, ConnectionID: id, Stage: "local", RequestID: typ + "-" + id,
		},
	}
}

// requireDetached requires that sess is no longer attached: touching it
// says the consumer was cancelled.
func requireDetached(t *testing.T, s *stack, sess *delivery.SessionState) {
	t.Helper()
	err := s.app.Service().TouchSession(t.Context(), sess, time.Minute)
	require.Error(t, err, "the session is still attached")
	require.Equal(t, delivery.ConsumerCancelledMessage, herr.MessageOf(err))
}

// makeDeadLetters dead-letters n events of type typ (the stack's delivery
// limit must be 1): each is delivered once, nacked, and dead-lettered at
// the next pull.
func makeDeadLetters(t *testing.T, s *stack, queue, typ string, n int) {
	t.Helper()
	createQueue(t, s, queue, typ)
	svc := s.app.Service()
	opened, err := svc.OpenSession(t.Context(), root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: queue}, time.Minute)
	st := opened.State
	require.NoError(t, err)
	publish(t, s, typ, n)
	for got := 0; got < n; {
		ds, err := svc.PollSession(t.Context(), delivery.PollParams{Principal: root, State: st, Limit: n, Wait: 50 * time.Millisecond, TTL: time.Minute})
		require.NoError(t, err)
		var refs []leasestore.EventRef
		for _, d := range ds {
			refs = append(refs, d.Ref)
		}
		got += len(ds)
		_, err = svc.SettleRefs(t.Context(), st, nil, refs, delivery.SettleReport{Nacked: len(refs)})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		_, _ = svc.PollSession(context.Background(), delivery.PollParams{Principal: root, State: st, Limit: n, TTL: time.Minute})
		dls, _, err := svc.ListDeadLetters(context.Background(), root, delivery.MaxDeadLetterPage, "")
		return err == nil && len(dls) >= n
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, svc.CloseSession(t.Context(), st))
}
