package cli

import (
	"context"
	"fmt"
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
				if queue != "" {
					var opts []client.StreamOption
					if !ack {
						opts = append(opts, client.WithoutAck())
					}
					fmt.Fprintf(a.io.Err, "following durable queue %s\n", queue)
					return c.Stream(ctx, queue, h, opts...)
				}
				opts := []client.StreamOption{client.OnReconnectToken(func(tok string) {
					fmt.Fprintf(a.io.Err, "reconnect token: %s\n", tok)
				})}
				if token != "" {
					opts = append(opts, client.WithReconnectToken(token))
				}
				return c.StreamNonDurable(ctx, gs, h, opts...)
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
	if p.a.json() {
		return printLine(p.a.io.Out, tailLine{ConsumerEvent: d.Event, DeliveryTag: d.DeliveryTag})
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
