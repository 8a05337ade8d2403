package wslambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wsframe/wstest"
	"github.com/heraldevents/herald/functions/wslambda"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/local/apigwws"
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

// TestDemandPastThePullCap: a demand for more than delivery.MaxPullLimit
// (100) events is met from a backlog by several pulls, not cut at 100.
func TestDemandPastThePullCap(t *testing.T) {
	t.Parallel()
	s := startStack(t, 5, apigwws.Options{})
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"non_durable","filter_groups":[{"event_type":"big.x"}]}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	for _, n := range []int{100, 100, 50} { // a batch holds at most 100
		publish(t, s, "big.x", n)
	}
	c.send(`{"type":"demand","n":250}`)
	a := c.untilIdle(250)
	require.Len(t, a.events, 250, "unmet %d", a.unmet)
	require.Empty(t, a.errors)
	c.send(`{"type":"demand","n":10}`)
	a = c.untilIdle(10)
	require.Empty(t, a.events)
	require.Equal(t, 10, a.unmet)
}

// TestOpenThenDemandAtOnce: with API Gateway's concurrency, a demand sent
// right after open (the browser example) is not refused for want of a
// stream: it waits for open's write.
func TestOpenThenDemandAtOnce(t *testing.T) {
	t.Parallel()
	s := startStack(t, 5, apigwws.Options{Concurrency: 4})
	createQueue(t, s, "q-race", "race.x")
	const conns = 8
	var wg sync.WaitGroup
	for i := range conns {
		c := dialToken(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				c.send(`{"type":"open","id":"o","stream":"non_durable","filter_groups":[{"event_type":"race.x"}]}`)
			} else {
				c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-race"}`)
			}
			c.send(`{"type":"demand","id":"d","n":1}`)
			seen := map[string]bool{}
			for !seen[wsframe.TypeConnected] || !(seen[wsframe.TypeIdle] || seen[wsframe.TypeEvent]) {
				f := c.next()
				if f.Type == wsframe.TypeError {
					t.Errorf("connection %d: %+v", i, f)
					return
				}
				seen[f.Type] = true
			}
		}()
	}
	wg.Wait()
}

// TestFailedPostsHandedBack: events whose post fails (the management API
// answers 500 to every attempt) are taken back out of the state and
// returned to the queue at once: nothing is orphaned, and the next demand
// gets them again, durable or not.
func TestFailedPostsHandedBack(t *testing.T) {
	t.Parallel()
	s := startStack(t, 5, apigwws.Options{})
	createQueue(t, s, "q-fail", "fail.x")
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-fail"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	id := s.onlyConnection(t)
	publish(t, s, "fail.x", 5)

	s.emu.FailNextPosts(wslambda.PostAttempts, http.StatusInternalServerError)
	c.send(`{"type":"demand","id":"d","n":5}`)
	a := c.untilIdle(5)
	require.Empty(t, a.events)
	require.Equal(t, 5, a.unmet)
	require.Len(t, a.errors, 1, "one error frame says the events went back")
	require.False(t, a.errors[0].Fatal)
	require.NotContains(t, a.errors[0].Message, "128 KB", "not a size problem")
	require.Empty(t, s.state(t, id).Session.Tags, "no orphaned tags")

	c.send(`{"type":"demand","n":5}`)
	a = c.untilIdle(5)
	require.Len(t, a.events, 5, "handed back at once, not after the ack timeout")
	for _, e := range a.events {
		require.EqualValues(t, 2, e.DeliveryCount)
	}
	require.Len(t, s.state(t, id).Session.Tags, 5)

	// A non-durable stream: the same, though its events carry no tags.
	nd := dialToken(t, s)
	nd.send(`{"type":"open","id":"o","stream":"non_durable","filter_groups":[{"event_type":"nd.x"}]}`)
	require.Equal(t, wsframe.TypeConnected, nd.next().Type)
	publish(t, s, "nd.x", 3)
	s.emu.FailNextPosts(wslambda.PostAttempts, http.StatusInternalServerError)
	nd.send(`{"type":"demand","n":3}`)
	a = nd.untilIdle(3)
	require.Empty(t, a.events)
	require.Equal(t, 3, a.unmet)
	nd.send(`{"type":"demand","n":3}`)
	a = nd.untilIdle(3)
	require.Len(t, a.events, 3, "nacked, not left leased")
	require.EqualValues(t, 2, a.events[0].DeliveryCount)
}

// TestThrottledPostsRetried: posts answered 429 are retried within the
// time budget: every event arrives, once.
func TestThrottledPostsRetried(t *testing.T) {
	t.Parallel()
	s := startStack(t, 5, apigwws.Options{})
	createQueue(t, s, "q-429", "t.x")
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-429"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	publish(t, s, "t.x", 3)
	s.emu.FailNextPosts(2, http.StatusTooManyRequests)
	c.send(`{"type":"demand","n":3}`)
	a := c.untilIdle(3)
	require.Len(t, a.events, 3)
	require.Empty(t, a.errors)
	for i, e := range a.events {
		require.EqualValues(t, i+1, e.DeliveryTag)
		require.EqualValues(t, 1, e.DeliveryCount)
	}
	_, failed := s.emu.PostCounts()
	require.EqualValues(t, 2, failed)
}

// TestDemandKeepsToTheDeadline: with a slow management API a demand stops
// posting before the invocation's deadline and hands back what it did not
// post, instead of running past it.
func TestDemandKeepsToTheDeadline(t *testing.T) {
	t.Parallel()
	s := startStack(t, 5, apigwws.Options{})
	createQueue(t, s, "q-slow", "slow.x")
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-slow"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	id := s.onlyConnection(t)
	publish(t, s, "slow.x", 20)

	s.emu.SetPostDelay(500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), wslambda.PostMargin+2*time.Second)
	defer cancel()
	_, err := s.handler.Handle(ctx, events.APIGatewayWebsocketProxyRequest{
		Body: `{"type":"demand","n":20}`,
		RequestContext: events.APIGatewayWebsocketProxyRequestContext{
			EventType: "MESSAGE", RouteKey: "$default", ConnectionID: id, Stage: s.emu.Stage(), RequestID: "slow-1",
		},
	})
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "the invocation ended before its deadline")
	s.emu.SetPostDelay(0)
	a := c.untilIdle(20)
	require.NotEmpty(t, a.events)
	require.Less(t, len(a.events), 20)
	require.Equal(t, 20-len(a.events), a.unmet)
	require.Len(t, s.state(t, id).Session.Tags, len(a.events), "only posted events keep tags")

	c.send(`{"type":"demand","n":20}`)
	b := c.untilIdle(20 - len(a.events))
	require.Len(t, b.events, 20-len(a.events), "the rest came back at once")
	require.EqualValues(t, 2, b.events[0].DeliveryCount)
}

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

// TestLogsKeepTokensOut: a stream failure's log line names a non-durable
// queue by a prefix of its id (its reconnect token), also where the
// failure's cause quotes it; and a lost session logged end to end does
// not print the token either.
func TestLogsKeepTokensOut(t *testing.T) {
	t.Parallel()
	const secret = "nd-0123456789abcdef-secret-token"
	var buf syncBuffer
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

// TestDisconnectRacesOpen: an open that lands between $disconnect's read
// and its delete is not lost: the delete is conditional, and the session
// the open attached is ended too. A repeated $connect ends the old
// record's session as well.
func TestDisconnectRacesOpen(t *testing.T) {
	t.Parallel()
	var h *wslambda.Handler
	var once sync.Once
	const id = "race-conn="
	var opened *delivery.SessionState
	var s *stack
	s = startStackWith(t, 5, apigwws.Options{}, nil, func(hh *wslambda.Handler) {
		h = hh
		wslambda.BeforeDisconnectDelete(h, func() {
			once.Do(func() {
				_, err := h.Handle(context.Background(), message(id, `{"type":"open","stream":"durable","queue_id":"q-dis"}`, "open-1"))
				require.NoError(t, err)
				opened = s.state(t, id).Session
			})
		})
	})
	createQueue(t, s, "q-dis", "dis.x")
	res, err := h.Handle(t.Context(), lifecycle(id, "CONNECT"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	_, err = h.Handle(t.Context(), lifecycle(id, "DISCONNECT"))
	require.NoError(t, err)
	require.NotNil(t, opened, "the open ran in between")
	_, err = s.app.Store().GetConnection(t.Context(), id)
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "the record is gone")
	requireDetached(t, s, opened)

	// A repeated $connect of one id ends the old record's session.
	const id2 = "again-conn="
	_, err = h.Handle(t.Context(), lifecycle(id2, "CONNECT"))
	require.NoError(t, err)
	_, err = h.Handle(t.Context(), message(id2, `{"type":"open","stream":"durable","queue_id":"q-dis"}`, "open-2"))
	require.NoError(t, err)
	old := s.state(t, id2).Session
	require.NotNil(t, old)
	res, err = h.Handle(t.Context(), lifecycle(id2, "CONNECT"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Nil(t, s.state(t, id2).Session, "a fresh record")
	requireDetached(t, s, old)
}

// TestGhostWrites: a record write that landed although the handler was
// told it failed (Aborted) is not applied twice: the events keep one set
// of tags, and an ack of them settles them all.
func TestGhostWrites(t *testing.T) {
	t.Parallel()
	var ghosts atomic.Int64
	s := startStackWith(t, 5, apigwws.Options{}, nil, func(h *wslambda.Handler) { wslambda.GhostWrites(h, &ghosts) })
	createQueue(t, s, "q-ghost", "g.x")
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-ghost"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	id := s.onlyConnection(t)
	publish(t, s, "g.x", 3)

	ghosts.Store(1)
	c.send(`{"type":"demand","n":3}`)
	a := c.untilIdle(3)
	require.Len(t, a.events, 3)
	require.Equal(t, []int64{1, 2, 3}, []int64{a.events[0].DeliveryTag, a.events[1].DeliveryTag, a.events[2].DeliveryTag})
	st := s.state(t, id)
	require.Len(t, st.Session.Tags, 3, "one set of tags")
	require.EqualValues(t, 3, st.Session.NextTag)

	ghosts.Store(1)
	c.send(`{"type":"ack","id":"a","delivery_tags":[1,2,3]}`)
	f := c.next()
	require.Equal(t, wsframe.TypeSettled, f.Type, "%+v", f)
	require.Equal(t, 3, *f.Acked)
	require.Equal(t, 0, *f.Skipped)
	require.Empty(t, s.state(t, id).Session.Tags)
}

// makeDeadLetters dead-letters n events of type typ (the stack's delivery
// limit must be 1): each is delivered once, nacked, and dead-lettered at
// the next pull.
func makeDeadLetters(t *testing.T, s *stack, queue, typ string, n int) {
	t.Helper()
	createQueue(t, s, queue, typ)
	svc := s.app.Service()
	st, _, err := svc.OpenSession(t.Context(), root, delivery.StreamRequest{Kind: delivery.Durable, QueueID: queue}, time.Minute)
	require.NoError(t, err)
	publish(t, s, typ, n)
	for got := 0; got < n; {
		ds, err := svc.PollSession(t.Context(), root, st, n, 50*time.Millisecond, time.Minute)
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
		_, _ = svc.PollSession(context.Background(), root, st, n, 0, time.Minute)
		dls, _, err := svc.ListDeadLetters(context.Background(), root, delivery.MaxDeadLetterPage, "")
		return err == nil && len(dls) >= n
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, svc.CloseSession(t.Context(), st))
}

// TestTriageStateBounded: a dead_letters stream holds at most
// MaxTriageTags unacted tags (idle at the cap), and dead letters replayed
// or discarded leave its record: the record does not grow with every dead
// letter ever shown. A failed outcome post does not stop the later ones.
func TestTriageStateBounded(t *testing.T) {
	t.Parallel()
	const total, maxTags = 12, 5
	s := startStackWith(t, 1, apigwws.Options{}, func(cfg *wslambda.Config) { cfg.MaxTriageTags = maxTags }, nil)
	makeDeadLetters(t, s, "q-dl", "dl.x", total)
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"dead_letters"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	id := s.onlyConnection(t)

	seen := map[string]bool{}
	for round := 0; len(seen) < total; round++ {
		require.Less(t, round, 10)
		c.send(`{"type":"demand","n":100}`)
		a := c.untilIdle(100)
		require.Len(t, a.events, min(maxTags, total-len(seen)), "round %d", round)
		require.Equal(t, 100-len(a.events), a.unmet)
		c.send(`{"type":"demand","n":1}`)
		require.Equal(t, 1, c.untilIdle(1).unmet, "at the cap, or nothing left: idle")
		var actions []string
		for _, e := range a.events {
			key := e.OriginQueue + e.DeadLetteredAt.String() + fmt.Sprint(e.Event.Message)
			require.False(t, seen[key], "shown once")
			seen[key] = true
			actions = append(actions, fmt.Sprintf(`{"delivery_tag":%d,"action":"DISCARD"}`, e.DeliveryTag))
		}
		if round == 0 {
			// The first outcome's post fails on every attempt: the
			// others still arrive.
			s.emu.FailNextPosts(wslambda.PostAttempts, http.StatusInternalServerError)
		}
		c.send(`{"type":"actions","id":"t","actions":[` + strings.Join(actions, ",") + `]}`)
		want := len(actions)
		if round == 0 {
			want--
		}
		for range want {
			f := c.next()
			require.Equal(t, wsframe.TypeOutcome, f.Type, "%+v", f)
			require.Equal(t, string(delivery.OutcomeDiscarded), f.Outcome)
		}
		st := s.state(t, id)
		require.Empty(t, st.DeadLetters.Tags)
		require.Empty(t, st.DeadLetters.Shown, "discarded dead letters are not kept")
	}
}

// TestConformanceConcurrent runs the suite with invocations of one
// connection overlapping (and $disconnect not waiting for them), as API
// Gateway may run them.
func TestConformanceConcurrent(t *testing.T) {
	t.Parallel()
	s := startStack(t, 2, apigwws.Options{Concurrency: 4})
	wstest.Run(t, wstest.Harness{
		Dial:          wstest.Dialer(s.wsURL()),
		RESTURL:       s.rest.URL,
		Token:         token,
		LimitedToken:  limited,
		DeliveryLimit: 2,
		Push:          false,
		NoCloseCodes:  true,
	})
}

// TestLostSession: only a gone queue or a cancelled consumer end the
// stream; other internal errors do not.
func TestLostSession(t *testing.T) {
	t.Parallel()
	require.True(t, wslambda.Lost(herr.New(herr.NotFound, "queue gone")))
	require.True(t, wslambda.Lost(herr.Wrap(herr.Internal, errors.New("detached"), delivery.ConsumerCancelledMessage)))
	require.False(t, wslambda.Lost(herr.New(herr.Internal, "cannot encode the connection state")))
	require.False(t, wslambda.Lost(herr.New(herr.Unavailable, "try again")))
}

// TestTriagePrunesVanished: dead letters discarded elsewhere (another
// operator, another connection) leave this stream's state at its next
// demand, so the cap does not hold the stream idle for good.
func TestTriagePrunesVanished(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, 1, apigwws.Options{}, func(cfg *wslambda.Config) { cfg.MaxTriageTags = 2 }, nil)
	makeDeadLetters(t, s, "q-dl2", "dl2.x", 4)
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"dead_letters"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	id := s.onlyConnection(t)
	c.send(`{"type":"demand","n":10}`)
	a := c.untilIdle(10)
	require.Len(t, a.events, 2, "the cap")
	require.Equal(t, 8, a.unmet)

	var reqs []delivery.DeadLetterRequest
	for _, dl := range s.state(t, id).DeadLetters.Tags {
		reqs = append(reqs, delivery.DeadLetterRequest{ID: dl, Action: delivery.ActionDiscard})
	}
	_, err := s.app.Service().ActOnDeadLetters(t.Context(), root, reqs)
	require.NoError(t, err)

	c.send(`{"type":"demand","n":10}`)
	a = c.untilIdle(10)
	require.Len(t, a.events, 2, "the discarded ones were pruned: room for the others")
	require.EqualValues(t, 3, a.events[0].DeliveryTag)
	require.Len(t, s.state(t, id).DeadLetters.Tags, 2)
}
