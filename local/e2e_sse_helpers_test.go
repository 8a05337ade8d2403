package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/local"
)

// frameWait bounds how long a test waits for a frame it expects. It is a
// safety net against a hung test, not a timing assertion: every frame the
// tests wait for is due at once.
const frameWait = 30 * time.Second

// sseFrame is one Server-Sent Events frame: an event, or a comment line.
type sseFrame struct {
	Event   string
	ID      string
	HasID   bool
	Data    string
	Comment string
}

// sseConn is an open SSE response read frame by frame in the background.
type sseConn struct {
	frames chan sseFrame
	done   chan struct{} // closed when the response ended
	cancel context.CancelFunc
	header http.Header
}

// consumerEvent is the notifications API's consumer Event as an SSE event frame carries
// it.
type consumerEvent struct {
	EventType         string          `json:"event_type"`
	PrincipalIdentity string          `json:"principal_identity"`
	OccurredAt        string          `json:"occurred_at"`
	PublishedAt       string          `json:"published_at"`
	Message           json.RawMessage `json:"message"`
	ID                string          `json:"id"`
	Resource          *struct {
		ResourceID string `json:"resource_id"`
	} `json:"resource"`
}

// streamOpts tunes an instance for stream tests.
func streamOpts(f func(*local.Config)) local.Option { return local.Option(f) }

// openStream sends GET path with the client's token and the extra
// headers. On 200 it returns the open stream; otherwise the response.
func (c *client) openStream(t testing.TB, path string, headers map[string]string) (*sseConn, *response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	require.NoError(t, err)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	hc := &http.Client{Transport: c.hc.Transport} // no client timeout: a stream is long
	res, err := hc.Do(req)
	require.NoError(t, err)
	if res.StatusCode != http.StatusOK {
		defer cancel()
		defer res.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(res.Body).WriteTo(&b)
		return nil, &response{Status: res.StatusCode, Header: res.Header, Body: []byte(b.String())}
	}
	s := &sseConn{frames: make(chan sseFrame, 1024), done: make(chan struct{}), cancel: cancel, header: res.Header}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 2<<20)
		var f sseFrame
		var data []string
		seen := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if seen {
					f.Data = strings.Join(data, "\n")
					s.frames <- f
				}
				f, data, seen = sseFrame{}, nil, false
			case strings.HasPrefix(line, ":"):
				s.frames <- sseFrame{Comment: strings.TrimSpace(line[1:])}
			default:
				seen = true
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "event":
					f.Event = value
				case "id":
					f.ID, f.HasID = value, true
				case "data":
					data = append(data, value)
				}
			}
		}
	}()
	t.Cleanup(s.close)
	return s, nil
}

// mustStream opens a stream and requires 200.
func (c *client) mustStream(t testing.TB, path string, headers map[string]string) *sseConn {
	t.Helper()
	s, r := c.openStream(t, path, headers)
	require.Nil(t, r, "GET %s: %+v", path, r)
	return s
}

// close drops the connection.
func (s *sseConn) close() { s.cancel() }

// frame returns the next frame, comments included. It fails the test when
// the stream ends first.
func (s *sseConn) frame(t testing.TB) sseFrame {
	t.Helper()
	return s.frameBy(t, time.Now().Add(frameWait))
}

func (s *sseConn) frameBy(t testing.TB, deadline time.Time) sseFrame {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case f := <-s.frames:
		return f
	case <-s.done:
		select {
		case f := <-s.frames:
			return f
		default:
		}
		require.FailNow(t, "the stream ended")
	case <-timer.C:
		require.FailNow(t, "no frame arrived")
	}
	return sseFrame{}
}

// next returns the next frame that is not a comment. Keep-alive comments
// do not extend the wait.
func (s *sseConn) next(t testing.TB) sseFrame {
	t.Helper()
	deadline := time.Now().Add(frameWait)
	for {
		if f := s.frameBy(t, deadline); f.Comment == "" {
			return f
		}
	}
}

// closeAndWait drops the connection and waits until Herald has detached
// its session from queue id: a stream acknowledges what it flushed, so an
// event published while the server still serves a connection the client
// has dropped would be acknowledged and lost to the client.
func (s *sseConn) closeAndWait(t testing.TB, c *client, id string) {
	t.Helper()
	s.close()
	deadline := time.Now().Add(frameWait)
	for liveSessions(t, c, id) > 0 {
		require.True(t, time.Now().Before(deadline), "the session of %s stays attached", id)
		time.Sleep(5 * time.Millisecond)
	}
}

// connected reads the first frame, requires it to be the notifications API's connected
// frame, and returns the reconnect token.
func (s *sseConn) connected(t testing.TB) string {
	t.Helper()
	f := s.next(t)
	require.Equal(t, "connected", f.Event)
	require.True(t, f.HasID, "the connected frame carries the token as its id")
	require.NotEmpty(t, f.ID)
	require.JSONEq(t, `{"message":"Connection established","reconnect_token":`+quote(f.ID)+`}`, f.Data)
	return f.ID
}

// event reads the next frame, requires an `event` frame without an id,
// and decodes it.
func (s *sseConn) event(t testing.TB) consumerEvent {
	t.Helper()
	f := s.next(t)
	require.Equal(t, "event", f.Event, "frame %+v", f)
	require.False(t, f.HasID, "only the connected frame carries an id")
	var e consumerEvent
	require.NoError(t, json.Unmarshal([]byte(f.Data), &e), f.Data)
	return e
}

// events reads n event frames.
func (s *sseConn) events(t testing.TB, n int) []consumerEvent {
	t.Helper()
	out := make([]consumerEvent, n)
	for i := range out {
		out[i] = s.event(t)
	}
	return out
}

// streamError reads the next frame, requires an `error` frame, and
// requires the stream to end after it.
func (s *sseConn) streamError(t testing.TB) (message string, status int) {
	t.Helper()
	f := s.next(t)
	require.Equal(t, "error", f.Event, "frame %+v", f)
	var e struct {
		Message    string `json:"message"`
		StatusCode int    `json:"status_code"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.Data), &e), f.Data)
	select {
	case <-s.done:
	case <-time.After(frameWait):
		require.FailNow(t, "the stream did not close after its error frame")
	}
	for {
		select {
		case f := <-s.frames:
			require.NotEqual(t, "event", f.Event, "no event follows an error")
			continue
		default:
		}
		break
	}
	return e.Message, e.StatusCode
}

// nValues returns the "n" of every event's message, in order.
func nValues(t testing.TB, es []consumerEvent) []int {
	t.Helper()
	out := make([]int, len(es))
	for i, e := range es {
		var m struct{ N int }
		require.NoError(t, json.Unmarshal(e.Message, &m))
		out[i] = m.N
	}
	return out
}

// streamPath builds /api/v1beta/events/stream with query pairs.
func streamPath(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	if len(q) == 0 {
		return "/api/v1beta/events/stream"
	}
	return "/api/v1beta/events/stream?" + q.Encode()
}

// durablePath builds /api/v1beta/events/stream-durable?queue_id=id.
func durablePath(id string) string {
	return "/api/v1beta/events/stream-durable?" + url.Values{"queue_id": {id}}.Encode()
}

// createQueue ensures durable queue id exists with groups and returns the
// answer's status and body.
func (c *client) createQueue(t testing.TB, id string, groups any) (int, queueAnswer) {
	t.Helper()
	body := map[string]any{}
	if id != "" {
		body["queue_id"] = id
	}
	if groups != nil {
		body["filter_groups"] = groups
	}
	r := c.must(t, "POST", "/api/v1beta/queues/durable", body)
	var q queueAnswer
	if r.Status < 300 {
		r.decode(t, &q)
	}
	return r.Status, q
}

// queueAnswer is the answer of POST /api/v1beta/queues/durable.
type queueAnswer struct {
	QueueID      string          `json:"queue_id"`
	Created      bool            `json:"created"`
	FilterGroups json.RawMessage `json:"filter_groups"`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// publishN publishes events of eventType with messages {"n": from…from+n-1},
// in batches: a batch is published in parallel, so their order is not
// theirs.
func (c *client) publishN(t testing.TB, eventType string, from, n int) {
	t.Helper()
	es := make([]map[string]any, n)
	for i := range es {
		es[i] = ev(eventType, "", map[string]any{"n": from + i})
	}
	for len(es) > 0 {
		k := min(len(es), 100)
		c.publish(t, es[:k]...)
		es = es[k:]
	}
}

// runJob runs a job over HTTP and returns its result.
func (c *client) runJob(t testing.TB, name string) map[string]any {
	t.Helper()
	var out map[string]any
	c.expect(t, http.StatusOK, "POST", "/v1/jobs/"+name, nil).decode(t, &out)
	return out
}

// liveSessions returns the live_sessions of GET /v1/event-destinations/{id}.
func liveSessions(t testing.TB, c *client, id string) int {
	t.Helper()
	var d struct {
		LiveSessions *int `json:"live_sessions"`
	}
	c.expect(t, http.StatusOK, "GET", "/v1/event-destinations/"+id, nil).decode(t, &d)
	require.NotNil(t, d.LiveSessions)
	return *d.LiveSessions
}
