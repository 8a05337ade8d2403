package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
)

func (a *app) tailCmd() *cobra.Command {
	var ff filterFlags
	var queue, token string
	var ack bool
	var count int
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow events as they arrive: a new non-durable stream, or a durable queue",
		Long: `tail prints events as they arrive, one a line (a table row, or a JSON object
with -o json), until Ctrl-C or --count events.

Without --queue it opens a non-durable queue over the filter flags (none:
every event the token may receive) and follows it over gRPC; the queue's
reconnect token is printed on standard error, and --reconnect-token resumes
a queue within its grace window (20 s by default). Cut connections are
resumed with the token.

With --queue it follows a durable queue. Without --ack it only looks: it
settles nothing, and what it was shown returns to the queue when tail
ends. With --ack every event printed is acknowledged.`,
		Example: `  herald tail
  herald tail --type myapp.user.created --prefix /users/
  herald tail --type myapp.file.uploaded --eq /projects/42/report.pdf -o json
  herald tail --queue my-queue --ack`,
		Args: exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			gs, err := ff.groups("filters")
			if err != nil {
				return err
			}
			switch {
			case queue != "" && (gs != nil || token != ""):
				return usagef("--queue cannot be combined with filters or --reconnect-token: a durable queue has its own filters")
			case ack && queue == "":
				return usagef("--ack needs --queue: a non-durable stream is acknowledged as it is sent")
			case count < 0:
				return usagef("--count must not be negative")
			}
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			p := &tailPrinter{a: a}
			seen := 0
			h := func(_ context.Context, d *client.Delivery) error {
				if err := p.print(d); err != nil {
					return err
				}
				seen++
				if count > 0 && seen >= count {
					stop() // graceful: this event is still settled
				}
				return nil
			}
			return a.withClient(func(c *client.Client) error {
				if err := a.probe(cmd.Context()); err != nil {
					return err
				}
				ctx, giveUp := context.WithCancelCause(ctx)
				defer giveUp(nil)
				w := &streamWatch{a: a, giveUp: giveUp}
				opts := []client.StreamOption{client.WithStreamLogger(slog.New(w))}
				var err error
				if queue != "" {
					if !ack {
						opts = append(opts, client.WithoutAck())
					}
					fmt.Fprintf(a.io.Err, "following durable queue %s\n", queue)
					err = c.Stream(ctx, queue, h, opts...)
				} else {
					opts = append(opts, client.OnReconnectToken(func(tok string) {
						w.connected()
						fmt.Fprintf(a.io.Err, "reconnect token: %s\n", tok)
					}))
					if token != "" {
						opts = append(opts, client.WithReconnectToken(token))
					}
					err = c.StreamNonDurable(ctx, gs, h, opts...)
				}
				if cause := context.Cause(ctx); err == nil && errors.As(cause, new(giveUpError)) {
					return cause // the stream returns nil when its context ends
				}
				return err
			})
		}),
	}
	ff.add(cmd, "filters")
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "follow this durable queue instead of a new non-durable one")
	f.BoolVar(&ack, "ack", false, "acknowledge every event printed (with --queue)")
	f.StringVar(&token, "reconnect-token", "", "resume the non-durable queue this token names")
	f.IntVar(&count, "count", 0, "stop after this many events (0: run until Ctrl-C)")
	return cmd
}

// tailPrinter prints one event a line.
type tailPrinter struct {
	a      *app
	mu     sync.Mutex
	header bool
}

// tailLine is the JSON form of a tailed event.
type tailLine struct {
	client.ConsumerEvent
	DeliveryTag int64 `json:"delivery_tag,omitempty"`
}

func (p *tailPrinter) print(d *client.Delivery) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.a.structured() {
		return p.a.emitItem(tailLine{ConsumerEvent: d.Event, DeliveryTag: d.DeliveryTag})
	}
	// Rows are written as they come, so columns are fixed-width rather
	// than aligned over the whole output.
	if !p.header {
		p.header = true
		fmt.Fprintf(p.a.io.Out, "%-30s  %-32s  %-16s  %s\n", "PUBLISHED", "TYPE", "PUBLISHER", "MESSAGE")
	}
	_, err := fmt.Fprintf(p.a.io.Out, "%-30s  %-32s  %-16s  %s\n", d.Event.PublishedAt.UTC().Format(time.RFC3339Nano),
		d.Event.Type, dash(d.Event.PrincipalIdentity), compact(d.Event.Message))
	return err
}

// probe makes one GET /health within --connect-timeout, so that a tail
// against nothing ends at once with exit 5 rather than reconnecting. Any
// HTTP answer will do: only a failure to connect is an error.
func (a *app) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.connectTimeout)
	defer cancel()
	base := strings.TrimRight(a.baseURL(), "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return usagef("--url %s is not a URL", redactedURL(base))
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: a.connectTimeout}).DialContext,
		TLSHandshakeTimeout: a.connectTimeout, Proxy: http.ProxyFromEnvironment,
	}}
	defer hc.CloseIdleConnections()
	res, err := hc.Do(req)
	if err != nil {
		return err // a *url.Error: a net.Error, so exit 5
	}
	return res.Body.Close()
}

// giveUpError ends a stream that could not reach Herald for
// --connect-timeout: last is the last failure.
type giveUpError struct {
	last  error
	after time.Duration
}

func (e giveUpError) Error() string {
	return fmt.Sprintf("gave up after %s: %v", e.after, e.last)
}

func (e giveUpError) Unwrap() error { return e.last }

// streamWatch receives the stream's reconnect log. It says on standard
// error when the stream is lost, and gives up (cancelling the stream with
// a giveUpError) when Herald has not been reachable for --connect-timeout:
// every reconnect since then failed to connect at all. A stream that Herald
// ended (a restart, a cut connection) but that connects again is not a
// failure to connect, and its reconnects go on.
type streamWatch struct {
	a      *app
	giveUp context.CancelCauseFunc

	mu    sync.Mutex
	since time.Time // start of the current run of failures to connect
	told  bool      // the loss of the stream was told
}

// connected says a stream opened.
func (w *streamWatch) connected() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.since, w.told = time.Time{}, false
}

func (w *streamWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *streamWatch) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *streamWatch) WithGroup(string) slog.Handler            { return w }

// Handle reads the client's "herald stream: reconnecting" records.
func (w *streamWatch) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "reconnecting") {
		return nil
	}
	var err error
	r.Attrs(func(at slog.Attr) bool {
		if at.Key == "err" {
			err, _ = at.Value.Any().(error)
		}
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if !dialFailure(err) {
		w.since = time.Time{}
		if !w.told {
			w.told = true
			reason := "it ended"
			if err != nil {
				reason = strings.ReplaceAll(err.Error(), "herald client: ", "")
			}
			fmt.Fprintf(w.a.io.Err, "herald: stream interrupted (%s); reconnecting\n", reason)
		}
		return nil
	}
	now := time.Now()
	if w.since.IsZero() {
		w.since, w.told = now, true
		fmt.Fprintf(w.a.io.Err, "herald: cannot reach Herald at %s (%s); retrying for up to %s\n",
			redactedURL(w.a.baseURL()), connectionCause(err), w.a.connectTimeout)
		return nil
	}
	if now.Sub(w.since) >= w.a.connectTimeout {
		w.giveUp(giveUpError{last: err, after: now.Sub(w.since).Round(time.Second)})
	}
	return nil
}

// dialFailure says whether err is a failure to open a connection at all
// (refused, unreachable, unknown host, a dial that timed out), as opposed
// to a stream that was open and was cut.
func dialFailure(err error) bool {
	var op *net.OpError
	return err != nil && errors.As(err, &op) && op.Op == "dial"
}
