package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
)

func (a *app) pullCmd() *cobra.Command {
	var consumer, worker string
	var limit, visibility int
	var ack, fail bool
	cmd := &cobra.Command{
		Use:   "pull",
		Short: "Lease the next batch of a durable consumer, and optionally acknowledge it",
		Long: `pull leases the next batch of --consumer for --visibility seconds and prints
it. With --ack the batch is then acknowledged ok (committed); with --fail it
is acknowledged failed (redelivered). Without either the lease stays with
--worker until its visibility timeout ends. A caught-up consumer prints
nothing and exits 0; a paused one exits 1.`,
		Example: `  herald pull --consumer ID
  herald pull --consumer ID --limit 100 --ack
  herald pull --consumer ID -o json | jq '.events[].data'`,
		Args: exactArgs(0, "no arguments: use --consumer"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			switch {
			case consumer == "":
				return usagef("pull needs --consumer")
			case ack && fail:
				return usagef("--ack and --fail exclude each other")
			case limit < 1 || limit > client.MaxPullLimit:
				return usagef("--limit must be 1-%d", client.MaxPullLimit)
			case visibility < 1 || visibility > int(client.MaxVisibility/time.Second):
				return usagef("--visibility must be 1-%d seconds", int(client.MaxVisibility/time.Second))
			}
			return a.withClient(func(c *client.Client) error {
				l, err := c.Pull(cmd.Context(), consumer, client.PullOptions{Limit: limit, Visibility: time.Duration(visibility) * time.Second, WorkerID: worker})
				if err != nil {
					return err
				}
				if l == nil {
					if a.json() {
						return printJSON(a.io.Out, map[string]any{"caught_up": true})
					}
					_, err := fmt.Fprintln(a.io.Err, "caught up: no events to lease")
					return err
				}
				var res *client.AckResult
				if ack || fail {
					status := client.AckOK
					if fail {
						status = client.AckFailed
					}
					r, err := c.Acknowledge(cmd.Context(), consumer, l, status)
					if err != nil {
						return err
					}
					res = &r
				}
				return a.printLease(l, res)
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&consumer, "consumer", "", "durable consumer id")
	f.IntVar(&limit, "limit", client.DefaultPullLimit, "most events in the batch, 1-100")
	f.IntVar(&visibility, "visibility", int(client.DefaultVisibility/time.Second), "visibility timeout in seconds, 1-600")
	f.StringVar(&worker, "worker", "herald-cli", "workerId: a worker that still holds a lease gets it back")
	f.BoolVar(&ack, "ack", false, "acknowledge the batch ok (commit it)")
	f.BoolVar(&fail, "fail", false, "acknowledge the batch failed (redeliver it)")
	return cmd
}

func (a *app) printLease(l *client.Lease, res *client.AckResult) error {
	if a.json() {
		out := map[string]any{"leaseId": l.ID, "generation": l.Generation, "attempt": l.Attempt,
			"expiresAt": l.ExpiresAt, "events": nonNilEvents(l.Events)}
		if res != nil {
			out["acknowledged"] = res
		}
		return printJSON(a.io.Out, out)
	}
	fmt.Fprintf(a.io.Out, "lease %s  generation %d  attempt %d  expires %s\n", l.ID, l.Generation, l.Attempt, l.ExpiresAt.UTC().Format(time.RFC3339))
	t := newTable(a.io.Out, "SEQUENCE", "TYPE", "SUBJECT", "TIME", "DATA")
	for _, e := range l.Events {
		seq, _ := e.Extensions()["sequence"].(string)
		t.row(seq, e.Type(), dash(e.Subject()), e.Time().UTC().Format(time.RFC3339Nano), compact(e.Data()))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if res != nil {
		fmt.Fprintf(a.io.Out, "acknowledged: %s, committed %s\n", res.Outcome, orDash(res.Committed))
	}
	return nil
}

func nonNilEvents(es []event.Event) []event.Event {
	if es == nil {
		return []event.Event{}
	}
	return es
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// compact is JSON on one line, cut to a width a table can show.
func compact(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) == nil {
		if c, err := json.Marshal(v); err == nil {
			b = c
		}
	}
	s := string(b)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	if s == "" {
		return "-"
	}
	return s
}
