package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	cpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
)

const nonDurableMethod = "/nvidia.omniverse.notifications.consumer.v1beta.EventConsumerService/ConsumeNonDurableEvents"

// openTimeout bounds one stream's open: the request up to its
// "connected" answer.
const openTimeout = 60 * time.Second

// clients opens streams of one transport to one Herald, each over a
// connection of its own, as many browsers or apps would.
type clients struct {
	transport string
	addr      string // Herald's host:port
	dialers   []*net.Dialer
	sse       []*http.Transport // one per source address
}

// stream is an open stream.
type stream interface {
	// read reads the stream until it ends, calling got with each event's
	// sequence number; it returns why the stream ended.
	read(got func(seq int)) error
}

// newClients prepares transport ("sse", "grpc" or "ws") clients of the
// Herald at addr, spreading their connections over srcIPs loopback
// source addresses (127.0.0.1 up).
func newClients(transport, addr string, srcIPs int) (*clients, error) {
	if srcIPs < 1 || srcIPs > 250 {
		return nil, fmt.Errorf("streams: %d source addresses: want 1-250", srcIPs)
	}
	switch transport {
	case "sse", "grpc", "ws":
	default:
		return nil, fmt.Errorf("streams: unknown transport %q (want sse, grpc or ws)", transport)
	}
	c := &clients{transport: transport, addr: addr}
	for i := range srcIPs {
		d := &net.Dialer{
			Timeout:   openTimeout,
			LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i))},
			// Binding a source address would otherwise take an
			// ephemeral port at bind time, unique across every
			// address; this defers the choice to connect, where the
			// port need only be unique for the address pair.
			Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				if err := rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
				}); err != nil {
					return err
				}
				return serr
			},
		}
		c.dialers = append(c.dialers, d)
		c.sse = append(c.sse, &http.Transport{DialContext: d.DialContext, DisableCompression: true, MaxIdleConnsPerHost: 1})
	}
	return c, nil
}

func (c *clients) close() {
	for _, t := range c.sse {
		t.CloseIdleConnections()
	}
}

// open opens stream i and waits for its "connected" answer; the stream
// is closed when ctx is.
func (c *clients) open(ctx context.Context, i int) (stream, error) {
	d := c.dialers[i%len(c.dialers)]
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	switch c.transport {
	case "sse":
		return c.openSSE(ctx, octx, c.sse[i%len(c.sse)])
	case "ws":
		return c.openWS(ctx, octx, d)
	default:
		return c.openGRPC(ctx, octx, d)
	}
}

// sseStream is an SSE stream (GET /api/v1beta/events/stream).
type sseStream struct {
	r      *bufio.Reader
	body   io.Closer
	cancel context.CancelFunc
}

func (c *clients) openSSE(ctx, octx context.Context, tr *http.Transport) (stream, error) {
	groups := url.QueryEscape(`[{"event_type":"` + eventType + `"}]`)
	// The request's context is the stream's, cancelled as well when the
	// open's bound passes first.
	rctx, rcancel := context.WithCancel(ctx)
	stop := context.AfterFunc(octx, func() {
		if octx.Err() == context.DeadlineExceeded {
			rcancel()
		}
	})
	defer stop()
	req, err := http.NewRequestWithContext(rctx, "GET", "http://"+c.addr+"/api/v1beta/events/stream?filter_groups="+groups, nil)
	if err != nil {
		rcancel()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		rcancel()
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 300))
		_ = res.Body.Close()
		rcancel()
		return nil, fmt.Errorf("SSE: status %d: %s", res.StatusCode, bytes.TrimSpace(b))
	}
	s := &sseStream{r: bufio.NewReaderSize(res.Body, 4096), body: res.Body, cancel: rcancel}
	typ, data, err := s.next()
	if err != nil || typ != "connected" {
		_ = res.Body.Close()
		rcancel()
		if err == nil {
			err = fmt.Errorf("SSE: %s before connected: %.300s", typ, data)
		}
		return nil, err
	}
	return s, nil
}

// next reads the next frame with data: its event type and data line.
func (s *sseStream) next() (typ string, data []byte, err error) {
	for {
		line, err := s.r.ReadSlice('\n')
		if err != nil {
			return "", nil, err
		}
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = string(bytes.TrimSpace(line[len("event: "):]))
		case bytes.HasPrefix(line, []byte("data: ")):
			return typ, line, nil
		}
	}
}

func (s *sseStream) read(got func(seq int)) error {
	defer s.cancel()
	defer s.body.Close()
	for {
		typ, data, err := s.next()
		if err != nil {
			return err
		}
		switch typ {
		case "event":
			seq, err := seqOf(data)
			if err != nil {
				return err
			}
			got(seq)
		case "error":
			return fmt.Errorf("SSE error event: %.300s", data)
		}
	}
}

// seqOf reads the event's message member "seq" from its JSON.
func seqOf(data []byte) (int, error) {
	i := bytes.Index(data, []byte(`"seq":`))
	if i < 0 {
		return 0, fmt.Errorf("no seq in %.200s", data)
	}
	data = data[i+len(`"seq":`):]
	n := 0
	for n < len(data) && data[n] >= '0' && data[n] <= '9' {
		n++
	}
	return strconv.Atoi(string(data[:n]))
}

// wsStream is a WebSocket stream (GET /api/v1beta/events/websocket).
type wsStream struct{ ws *websocket.Conn }

func (c *clients) openWS(ctx, octx context.Context, d *net.Dialer) (stream, error) {
	dialer := &websocket.Dialer{NetDialContext: d.DialContext, HandshakeTimeout: openTimeout, ReadBufferSize: 4096, WriteBufferSize: 1024}
	ws, res, err := dialer.DialContext(octx, "ws://"+c.addr+"/api/v1beta/events/websocket", http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		if res != nil {
			return nil, fmt.Errorf("WebSocket: status %d: %w", res.StatusCode, err)
		}
		return nil, err
	}
	if res.Body != nil {
		_ = res.Body.Close()
	}
	fail := func(err error) (stream, error) {
		_ = ws.Close()
		return nil, err
	}
	_ = ws.SetWriteDeadline(time.Now().Add(openTimeout))
	_ = ws.SetReadDeadline(time.Now().Add(openTimeout))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"open","stream":"non_durable","filter_groups":[{"event_type":"`+eventType+`"}]}`)); err != nil {
		return fail(err)
	}
	_, f, err := ws.ReadMessage()
	if err != nil {
		return fail(err)
	}
	if !bytes.HasPrefix(f, []byte(`{"type":"connected"`)) {
		return fail(fmt.Errorf("WebSocket: %.300s", f))
	}
	// Credit for every event of a run: the server keeps it.
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"demand","n":1000}`)); err != nil {
		return fail(err)
	}
	_ = ws.SetWriteDeadline(time.Time{})
	_ = ws.SetReadDeadline(time.Time{})
	context.AfterFunc(ctx, func() { _ = ws.Close() })
	return &wsStream{ws: ws}, nil
}

func (s *wsStream) read(got func(seq int)) error {
	for {
		_, f, err := s.ws.ReadMessage()
		if err != nil {
			return err
		}
		switch {
		case bytes.HasPrefix(f, []byte(`{"type":"event"`)):
			seq, err := seqOf(f)
			if err != nil {
				return err
			}
			got(seq)
		case bytes.HasPrefix(f, []byte(`{"type":"error"`)):
			return fmt.Errorf("WebSocket: %.300s", f)
		}
	}
}

// grpcStream is a ConsumeNonDurableEvents stream.
type grpcStream struct {
	s grpc.ClientStream
}

func (c *clients) openGRPC(ctx, octx context.Context, d *net.Dialer) (stream, error) {
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { _ = conn.Close() })
	sctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	type opened struct {
		s   grpc.ClientStream
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := conn.NewStream(sctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, nonDurableMethod)
		if err == nil {
			err = s.SendMsg(&cpb.ConsumeNonDurableEventsRequest{FilterGroups: []*cpb.FilterGroup{{EventType: eventType}}})
		}
		if err == nil {
			first := &cpb.ConsumeNonDurableEventsResponse{}
			if err = s.RecvMsg(first); err == nil && first.GetReconnectToken() == "" {
				err = errors.New("gRPC: the first response carries no reconnect token")
			}
		}
		done <- opened{s, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			_ = conn.Close()
			return nil, o.err
		}
		return &grpcStream{s: o.s}, nil
	case <-octx.Done():
		_ = conn.Close()
		return nil, fmt.Errorf("gRPC open: %w", octx.Err())
	}
}

func (s *grpcStream) read(got func(seq int)) error {
	for {
		res := &cpb.ConsumeNonDurableEventsResponse{}
		if err := s.s.RecvMsg(res); err != nil {
			return err
		}
		for _, ev := range res.GetEvents() {
			got(int(ev.GetMessage().GetFields()["seq"].GetNumberValue()))
		}
	}
}
