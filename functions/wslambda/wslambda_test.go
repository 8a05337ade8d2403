package wslambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wsframe/wstest"
	"github.com/heraldevents/herald/functions/wslambda"
	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
	"github.com/heraldevents/herald/internal/logcheck"
	"github.com/heraldevents/herald/internal/testkit"
	"github.com/heraldevents/herald/local/apigwws"
)

const (
	token   = "wslambda-test-token-0123456789"
	limited = "wslambda-limited-token-0123456789"
	other   = "wslambda-other-token-0123456789"
	reader  = "wslambda-reader-token-0123456789"
)

var stackCount atomic.Int64

// stack is Herald's REST API and the wslambda handler over one in-memory
// broker and store, the handler behind the API Gateway emulator.
type stack struct {
	app     *app.App
	rest    *httptest.Server
	emu     *apigwws.Server
	emuSrv  *httptest.Server
	handler *wslambda.Handler
	logs    *testkit.SyncBuffer // the handler's log lines
}

func (s *stack) wsURL() string { return s.emu.WebSocketURL(s.emuSrv.URL) }

func startStack(t *testing.T, deliveryLimit int, emuOpts apigwws.Options, now ...func() time.Time) *stack {
	t.Helper()
	return startStackWith(t, deliveryLimit, emuOpts, nil, nil, now...)
}

// startStackWith is startStack with configure changing the handler's
// Config and setup running on the handler before it handles events
// (either may be nil).
func startStackWith(t *testing.T, deliveryLimit int, emuOpts apigwws.Options, configure func(*wslambda.Config), setup func(*wslambda.Handler), now ...func() time.Time) *stack {
	t.Helper()
	n := stackCount.Add(1)
	readerPermissions, err := json.Marshal(wstest.ReaderPermissions)
	require.NoError(t, err)
	env := map[string]string{
		config.EnvTopicURL:      fmt.Sprintf("mem://wslambda-%d", n),
		config.EnvStoreURL:      fmt.Sprintf("mem://wslambda-%d/key", n),
		config.EnvDevToken:      token,
		config.EnvTokens:        `{"` + limited + `": {"id": "publisher", "permissions": ["publish:*"]}, "` + other + `": {"id": "other", "permissions": ["receive:*"]}, "` + reader + `": {"id": "reader", "permissions": ` + string(readerPermissions) + `}}`,
		config.EnvDeliveryLimit: fmt.Sprint(deliveryLimit),
	}
	cfg, err := config.Load(config.Local, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	// Every line the stack logs, the REST API's and the handler's, is
	// checked for the tokens and for reconnect tokens and JWTs.
	leaks := logcheck.New(token, limited, other)
	t.Cleanup(func() { leaks.Check(t) })
	logger := slog.New(leaks.Handler(slog.NewTextHandler(io.Discard, nil)))
	opts := app.Options{Logger: logger}
	if len(now) > 0 {
		opts.Now = now[0]
	}
	a, err := app.Open(t.Context(), cfg, opts)
	require.NoError(t, err)
	s := &stack{app: a, rest: httptest.NewServer(a.Handler()), logs: &testkit.SyncBuffer{}}
	var mgmt atomic.Pointer[apigwmgmt.Client]
	hcfg := wslambda.Config{
		Service: a.Service(), Store: a.Store(), Auth: cfg.Authenticator(),
		Endpoints: func(domainName, stage string) (wslambda.Poster, error) { return mgmt.Load(), nil },
		PollWait:  300 * time.Millisecond, SessionTTL: time.Minute,
		Logger: slog.New(leaks.Handler(slog.NewTextHandler(s.logs, nil))),
	}
	if configure != nil {
		configure(&hcfg)
	}
	s.handler = wslambda.New(hcfg)
	if setup != nil {
		setup(s.handler)
	}
	emuOpts.Credentials = credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")
	s.emu = apigwws.New(apigwws.Handler(s.handler.Handle), emuOpts)
	s.emuSrv = httptest.NewServer(s.emu)
	mgmt.Store(&apigwmgmt.Client{
		Endpoint: s.emu.ManagementEndpoint(s.emuSrv.URL), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	t.Cleanup(func() {
		s.emu.Close()
		s.emuSrv.Close()
		s.rest.Close()
		require.NoError(t, a.Close())
	})
	return s
}

// TestConformance runs the WebSocket frame protocol's suite against the
// handler behind the API Gateway emulator, in process.
func TestConformance(t *testing.T) {
	t.Parallel()
	s := startStack(t, 2, apigwws.Options{})
	wstest.Run(t, wstest.Harness{
		Dial:          wstest.Dialer(s.wsURL()),
		RESTURL:       s.rest.URL,
		Token:         token,
		LimitedToken:  limited,
		OtherToken:    other,
		ReaderToken:   reader,
		DeliveryLimit: 2,
		Push:          false,
		NoCloseCodes:  true,
	})
}

// client is a bare frame client for the cases the suite does not cover.
type client struct {
	t  *testing.T
	ws *websocket.Conn
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
		OtherToken:    other,
		ReaderToken:   reader,
		DeliveryLimit: 2,
		Push:          false,
		NoCloseCodes:  true,
	})
}

func dial(t *testing.T, s *stack, query string, hdr http.Header) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(s.wsURL()+query, hdr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return &client{t: t, ws: ws}
}

func (c *client) send(frame string) {
	c.t.Helper()
	require.NoError(c.t, c.ws.WriteMessage(websocket.TextMessage, []byte(frame)))
}

func (c *client) next() wsframe.ServerFrame {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(15*time.Second)))
	_, b, err := c.ws.ReadMessage()
	require.NoError(c.t, err)
	var f wsframe.ServerFrame
	require.NoError(c.t, json.Unmarshal(b, &f))
	return f
}

func publish(t *testing.T, s *stack, typ string, n int) {
	t.Helper()
	var evs []map[string]any
	for i := range n {
		evs = append(evs, map[string]any{"event_type": typ, "message": map[string]int{"n": i}})
	}
	b, _ := json.Marshal(map[string]any{"events": evs})
	req, _ := http.NewRequest("POST", s.rest.URL+"/api/v1beta/events/batch", bytesReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
}

// TestStateLivesInTheStore: the connection record holds the principal and
// the session, and a second handler over the same store (another Lambda
// instance) carries the connection on: frames of one connection may land
// on any instance.
func TestStateLivesInTheStore(t *testing.T) {
	t.Parallel()
	s := startStack(t, 5, apigwws.Options{})
	c := dial(t, s, "?"+url.Values{"access_token": {token}}.Encode(), nil)
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-state"}`)
	f := c.next()
	require.Equal(t, wsframe.TypeError, f.Type, "no such queue yet")
	require.True(t, f.Fatal)
	require.Equal(t, http.StatusNotFound, f.StatusCode)

	req, _ := http.NewRequest("POST", s.rest.URL+"/api/v1beta/queues/durable", bytesReader([]byte(`{"queue_id":"q-state","filter_groups":[{"event_type":"st.x"}]}`)))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)

	// The first connection may still be listed: the emulator forgets a
	// connection the server closed on its own time. The new one is the
	// one that was not there before.
	before := map[string]bool{}
	for _, id := range s.emu.Connections() {
		before[id] = true
	}
	c = dial(t, s, "", http.Header{"Authorization": {"Bearer " + token}})
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-state"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	publish(t, s, "st.x", 3)
	c.send(`{"type":"demand","n":3}`)
	var tags []int64
	for len(tags) < 3 {
		f := c.next()
		if f.Type == wsframe.TypeIdle {
			c.send(fmt.Sprintf(`{"type":"demand","n":%d}`, *f.Unmet))
			continue
		}
		require.Equal(t, wsframe.TypeEvent, f.Type, "%+v", f)
		tags = append(tags, f.DeliveryTag)
	}
	require.Equal(t, []int64{1, 2, 3}, tags)

	var ids []string
	for _, id := range s.emu.Connections() {
		if !before[id] {
			ids = append(ids, id)
		}
	}
	require.Len(t, ids, 1)
	rec, err := s.app.Store().GetConnection(t.Context(), ids[0])
	require.NoError(t, err)
	var st wslambda.State
	require.NoError(t, json.Unmarshal(rec.Data, &st))
	require.Equal(t, "herald:dev", st.Principal.ID)
	require.Equal(t, wsframe.StreamDurable, st.Stream)
	require.NotNil(t, st.Session)
	require.Equal(t, "q-state", st.Session.Queue)
	require.Len(t, st.Session.Tags, 3)
	require.NotContains(t, string(rec.Data), token, "the token is not stored")

	// Another instance over the same store acks: the state is shared.
	other := wslambda.New(wslambda.Config{
		Service: s.app.Service(), Store: s.app.Store(), Auth: nil,
		Endpoints: func(string, string) (wslambda.Poster, error) {
			return &apigwmgmt.Client{
				Endpoint: s.emu.ManagementEndpoint(s.emuSrv.URL), Region: "us-east-1",
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
			}, nil
		},
	})
	res2, err := other.Handle(t.Context(), events.APIGatewayWebsocketProxyRequest{
		Body: `{"type":"ack","id":"a","delivery_tags":[1,3,9]}`,
		RequestContext: events.APIGatewayWebsocketProxyRequestContext{
			EventType: "MESSAGE", RouteKey: "$default", ConnectionID: ids[0], Stage: s.emu.Stage(),
		},
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res2.StatusCode)
	f = c.next()
	require.Equal(t, wsframe.TypeSettled, f.Type)
	require.Equal(t, 2, *f.Acked)
	require.Equal(t, 1, *f.Skipped)

	// $disconnect removes the record and returns tag 2's event.
	require.NoError(t, c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1000, "")))
	require.Eventually(t, func() bool {
		_, err := s.app.Store().GetConnection(context.Background(), ids[0])
		return err != nil
	}, 10*time.Second, 20*time.Millisecond)
	c = dial(t, s, "", http.Header{"Authorization": {"Bearer " + token}})
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-state"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	c.send(`{"type":"demand","n":1}`)
	f = c.next()
	require.Equal(t, wsframe.TypeEvent, f.Type)
	require.Equal(t, int64(2), f.DeliveryCount, "the unsettled event came back")
}

// TestConcurrentFrames: with API Gateway's concurrency (frames of one
// connection handled at once), every delivered event gets a distinct tag
// and every ack settles exactly once: the conditional writes decide.
func TestConcurrentFrames(t *testing.T) {
	t.Parallel()
	s := startStack(t, 5, apigwws.Options{Concurrency: 8})
	req, _ := http.NewRequest("POST", s.rest.URL+"/api/v1beta/queues/durable", bytesReader([]byte(`{"queue_id":"q-conc","filter_groups":[{"event_type":"conc.x"}]}`)))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	c := dial(t, s, "", http.Header{"Authorization": {"Bearer " + token}})
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-conc"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	const total = 40
	publish(t, s, "conc.x", total)
	for range 8 {
		c.send(`{"type":"demand","n":5}`)
	}
	tags := map[int64]bool{}
	for len(tags) < total {
		f := c.next()
		switch f.Type {
		case wsframe.TypeIdle:
			c.send(fmt.Sprintf(`{"type":"demand","n":%d}`, *f.Unmet))
		case wsframe.TypeEvent:
			require.False(t, tags[f.DeliveryTag], "tag %d issued twice", f.DeliveryTag)
			tags[f.DeliveryTag] = true
		default:
			t.Fatalf("unexpected frame %+v", f)
		}
	}
	for tag := range tags {
		c.send(fmt.Sprintf(`{"type":"ack","delivery_tags":[%d]}`, tag))
	}
	acked := 0
	for settled := 0; settled < total; {
		f := c.next()
		if f.Type == wsframe.TypeIdle || f.Type == wsframe.TypeEvent {
			continue
		}
		require.Equal(t, wsframe.TypeSettled, f.Type, "%+v", f)
		settled++
		acked += *f.Acked
	}
	require.Equal(t, total, acked, "every ack settled exactly once")
	ids := s.emu.Connections()
	rec, err := s.app.Store().GetConnection(t.Context(), ids[0])
	require.NoError(t, err)
	var st wslambda.State
	require.NoError(t, json.Unmarshal(rec.Data, &st))
	require.Empty(t, st.Session.Tags)
}

// TestConnectRefusals: no token or a wrong one is 401; the subprotocol
// is selected only when offered.
func TestConnectRefusals(t *testing.T) {
	t.Parallel()
	s := startStack(t, 5, apigwws.Options{})
	_, res, err := websocket.DefaultDialer.Dial(s.wsURL(), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	_, res, err = websocket.DefaultDialer.Dial(s.wsURL()+"?access_token=nope-nope-nope", nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	b, _ := io.ReadAll(res.Body)
	require.NotContains(t, string(b), "nope-nope")

	ws, res, err := websocket.DefaultDialer.Dial(s.wsURL(), http.Header{"Authorization": {"Bearer " + token}})
	require.NoError(t, err)
	ws.Close()
	require.Empty(t, res.Header.Get("Sec-WebSocket-Protocol"))
	d := websocket.Dialer{Subprotocols: []string{"other", wsframe.Subprotocol}}
	ws, res, err = d.Dial(s.wsURL(), http.Header{"Authorization": {"Bearer " + token}})
	require.NoError(t, err)
	ws.Close()
	require.Equal(t, wsframe.Subprotocol, res.Header.Get("Sec-WebSocket-Protocol"))
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// TestReapStaleConnections: the reap-idle-queues job removes connection
// records older than 2 hours (a $disconnect that never came) and ends
// their sessions, so their unsettled events are delivered again.
func TestReapStaleConnections(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	s := startStack(t, 5, apigwws.Options{}, now)
	req, _ := http.NewRequest("POST", s.rest.URL+"/api/v1beta/queues/durable", bytesReader([]byte(`{"queue_id":"q-reap","filter_groups":[{"event_type":"reap.x"}]}`)))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	c := dial(t, s, "", http.Header{"Authorization": {"Bearer " + token}})
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-reap"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	publish(t, s, "reap.x", 1)
	c.send(`{"type":"demand","n":1}`)
	f := c.next()
	require.Equal(t, wsframe.TypeEvent, f.Type, "%+v", f)
	id := s.emu.Connections()[0]

	run := func() *jobs.Result {
		r, err := jobs.Run(t.Context(), s.app.Service(), jobs.SchedulerPrincipal, jobs.ReapIdleQueues, jobs.Options{CloseStaleConnections: wslambda.CloseStale})
		require.NoError(t, err)
		return r
	}
	require.Equal(t, 0, *run().ReapedConnections, "a fresh record stays")
	offset.Store(int64(wslambda.StaleAfter + time.Minute))
	require.Equal(t, 1, *run().ReapedConnections)
	_, err = s.app.Store().GetConnection(t.Context(), id)
	require.Error(t, err, "the record is gone")

	// The session was ended: the event is delivered again, to a new
	// connection (this one's frames now find no record: fatal 404).
	c.send(`{"type":"demand","n":1}`)
	f = c.next()
	require.Equal(t, wsframe.TypeError, f.Type)
	require.True(t, f.Fatal)
	require.Equal(t, http.StatusNotFound, f.StatusCode)
	c2 := dial(t, s, "", http.Header{"Authorization": {"Bearer " + token}})
	c2.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-reap"}`)
	require.Equal(t, wsframe.TypeConnected, c2.next().Type)
	c2.send(`{"type":"demand","n":1}`)
	f = c2.next()
	require.Equal(t, wsframe.TypeEvent, f.Type, "%+v", f)
	require.Equal(t, int64(2), f.DeliveryCount)
}

// TestPingsKeepTheSession: on API Gateway a client that only pings and
// settles (no demand) keeps its session past SessionTTL; one that falls
// silent for longer loses it and is told so.
func TestPingsKeepTheSession(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	advance := func(d time.Duration) { offset.Add(int64(d)) }
	s := startStack(t, 5, apigwws.Options{}, now) // SessionTTL: 1 minute
	req, _ := http.NewRequest("POST", s.rest.URL+"/api/v1beta/queues/durable", bytesReader([]byte(`{"queue_id":"q-touch","filter_groups":[{"event_type":"touch.x"}]}`)))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	c := dial(t, s, "", http.Header{"Authorization": {"Bearer " + token}})
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-touch"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	publish(t, s, "touch.x", 2)
	c.send(`{"type":"demand","n":1}`)
	ev := c.next()
	require.Equal(t, wsframe.TypeEvent, ev.Type, "%+v", ev)

	// Three times 40 s of pings and an ack: 2 minutes without a demand.
	for i := range 3 {
		advance(40 * time.Second)
		if i == 1 {
			c.send(fmt.Sprintf(`{"type":"ack","id":"a","delivery_tags":[%d]}`, ev.DeliveryTag))
			f := c.next()
			require.Equal(t, wsframe.TypeSettled, f.Type, "%+v", f)
			require.Equal(t, 1, *f.Acked)
			continue
		}
		c.send(fmt.Sprintf(`{"type":"ping","id":"p%d"}`, i))
		f := c.next()
		require.Equal(t, wsframe.TypePong, f.Type, "%+v", f)
	}
	c.send(`{"type":"demand","n":1}`)
	f := c.next()
	require.Equal(t, wsframe.TypeEvent, f.Type, "the session is still attached: %+v", f)

	// Silent for longer than the TTL: the next frame is told the session
	// is gone, with the notifications API's message.
	advance(2 * time.Minute)
	c.send(`{"type":"ping","id":"late"}`)
	f = c.next()
	require.Equal(t, wsframe.TypeError, f.Type, "%+v", f)
	require.True(t, f.Fatal)
	require.Equal(t, http.StatusInternalServerError, f.StatusCode)
	require.Contains(t, f.Message, "broker cancelled this stream's consumer")
}
