package client_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/local"
)

// callTimeout bounds every test's calls; it is a bound, not an expected
// duration.
const callTimeout = 60 * time.Second

// bundle is a test's Herald and a client of it.
type bundle struct {
	h *local.Instance
	c *client.Client
}

// setup starts a Herald with opts and a client of it.
func setup(t *testing.T, opts ...local.Option) *bundle {
	t.Helper()
	h := local.Start(t, opts...)
	c, err := client.New(h.URL, client.WithToken(h.Token))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return &bundle{h: h, c: c}
}

// ctx is a context bounded by callTimeout and the test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// publish publishes one JSON event of type typ and subject sub.
func (b *bundle) publish(t *testing.T, typ, sub string, data any) {
	t.Helper()
	e, err := client.NewEvent(typ, sub, data)
	require.NoError(t, err)
	res, err := b.c.Publish(testContext(t), e)
	require.NoError(t, err)
	require.True(t, res.Success, res.FailureReason)
}

// cutProxy forwards TCP connections to a target and can cut every open
// one, as a restart or a network failure would.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cuts   int
}

func newCutProxy(t *testing.T, targetURL string) *cutProxy {
	t.Helper()
	u, err := url.Parse(targetURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: u.Host}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *cutProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

// cut closes every connection open now.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.cuts++
}
