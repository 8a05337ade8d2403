package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
)

func (a *app) pullCmd() *cobra.Command {
	var consumer, worker string
	var limit, visibility, retryAfter, extend int
	var ack, fail, reject bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "pull",
		Short: "Lease the next batch of a durable consumer, and acknowledge, reject or extend it",
		Long: `pull leases the next batch of --consumer for --visibility seconds and prints
it. Then, at most one of:

  --ack              acknowledge it ok: commit it
  --fail             acknowledge it failed: it is redelivered, after
                     --retry-after seconds when given, else as the
                     consumer's retry policy says (at once without one)
  --reject           give up on it: its events go to the dead-letter queue
                     at once (reason REJECTED) and the cursor passes them
  --extend SECONDS   keep the lease SECONDS from now (1-600; a lease lives
                     at most 12 hours from its hand-out)

Without any of them the lease stays with --worker until its visibility
timeout ends. A worker that still holds a lease gets that same lease back,
so 'herald pull --worker W --ack' (or --extend) settles the lease W holds.

A caught-up consumer prints nothing and exits 0, or, with --wait, is pulled
again until a batch comes or the wait ends. A paused one exits 1.`,
		Example: `  herald pull --consumer ID
  herald pull --consumer ID --limit 100 --ack
  herald pull --consumer ID --wait 30s --ack          # wait up to 30 s for a batch
  herald pull --consumer ID --fail --retry-after 60   # not before a minute
  herald pull --consumer ID --reject                  # straight to the dead-letter queue
  herald pull --consumer ID --worker w1 --extend 300  # keep w1's lease 5 more minutes
  herald pull --consumer ID -o json | jq '.events[].data'`,
		Args: exactArgs(0, "no arguments: use --consumer"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			settles := 0
			for _, b := range []bool{ack, fail, reject, extend != 0} {
				if b {
					settles++
				}
			}
			switch {
			case consumer == "":
				return usagef("pull needs --consumer")
			case settles > 1:
				return usagef("--ack, --fail, --reject and --extend exclude each other")
			case limit < 1 || limit > client.MaxPullLimit:
				return usagef("--limit must be 1-%d", client.MaxPullLimit)
			case visibility < 1 || visibility > int(client.MaxVisibility/time.Second):
				return usagef("--visibility must be 1-%d seconds", int(client.MaxVisibility/time.Second))
			case cmd.Flags().Changed("retry-after") && !fail:
				return usagef("--retry-after goes with --fail")
			case retryAfter < 0 || retryAfter > int(client.MaxRetryAfter/time.Second):
				return usagef("--retry-after must be 0-%d seconds", int(client.MaxRetryAfter/time.Second))
			case cmd.Flags().Changed("extend") && (extend < 1 || extend > int(client.MaxVisibility/time.Second)):
				return usagef("--extend must be 1-%d seconds", int(client.MaxVisibility/time.Second))
			case wait < 0:
				return usagef("--wait must not be negative")
			}
			return a.withClient(func(c *client.Client) error {
				ctx := cmd.Context()
				opts := client.PullOptions{Limit: limit, Visibility: time.Duration(visibility) * time.Second, WorkerID: worker}
				l, err := pullWaiting(ctx, c, consumer, opts, wait)
				if err != nil {
					return err
				}
				if l == nil {
					if a.structured() {
						return a.emit(map[string]any{"caught_up": true})
					}
					_, err := fmt.Fprintln(a.io.Err, "caught up: no events to lease")
					return err
				}
				var res *client.AckResult
				var ext *client.ExtendResult
				switch {
				case ack, fail, reject:
					ackBy := client.Ack{Status: client.AckOK, RetryAfter: time.Duration(retryAfter) * time.Second}
					if fail {
						ackBy.Status = client.AckFailed
					} else if reject {
						ackBy.Status = client.AckRejected
					}
					r, err := c.AcknowledgeWith(ctx, consumer, l, ackBy)
					if err != nil {
						return err
					}
					res = &r
				case extend != 0:
					r, err := c.Extend(ctx, consumer, l, time.Duration(extend)*time.Second)
					if err != nil {
						return err
					}
					ext = &r
				}
				return a.printLease(l, res, ext)
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
	f.IntVar(&retryAfter, "retry-after", 0, "with --fail: redeliver no sooner than this many seconds, 0-43200")
	f.BoolVar(&reject, "reject", false, "reject the batch: dead-letter its events at once")
	f.IntVar(&extend, "extend", 0, "keep the lease this many seconds from now, 1-600")
	f.DurationVar(&wait, "wait", 0, "when caught up, pull again until a batch comes or this long has passed (e.g. 30s)")
	return cmd
}

// Waits between the pulls of --wait: from pullFirstWait, doubling up to
// pullMostWait.
const (
	pullFirstWait = 100 * time.Millisecond
	pullMostWait  = 2 * time.Second
)

// pullWaiting pulls; while the consumer is caught up it pulls again,
// after a wait that doubles from 100 ms to 2 s, until a batch comes or
// wait has passed (then nil, nil). The durable-consumer API answers a
// caught-up pull at once, so the wait is the client's.
func pullWaiting(ctx context.Context, c *client.Client, consumer string, opts client.PullOptions, wait time.Duration) (*client.Lease, error) {
	deadline := time.Now().Add(wait)
	pause := pullFirstWait
	for {
		l, err := c.Pull(ctx, consumer, opts)
		if err != nil || l != nil {
			return l, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil // Ctrl-C while waiting: caught up
		case <-t.C:
		}
		pause = min(2*pause, pullMostWait)
	}
}

// leaseView is the JSON form of a pulled lease.
type leaseView struct {
	LeaseID      string               `json:"leaseId"`
	Generation   int64                `json:"generation"`
	Attempt      int64                `json:"attempt"`
	ExpiresAt    time.Time            `json:"expiresAt"`
	Events       []event.Event        `json:"events"`
	Acknowledged *client.AckResult    `json:"acknowledged,omitempty"`
	Extended     *client.ExtendResult `json:"extended,omitempty"`
}

func (a *app) printLease(l *client.Lease, res *client.AckResult, ext *client.ExtendResult) error {
	if a.structured() {
		return a.emit(leaseView{LeaseID: l.ID, Generation: l.Generation, Attempt: l.Attempt, ExpiresAt: l.ExpiresAt,
			Events: nonNilEvents(l.Events), Acknowledged: res, Extended: ext})
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
	if ext != nil {
		if ext.Outcome == client.OutcomeExtended {
			fmt.Fprintf(a.io.Out, "extended: expires %s\n", ext.ExpiresAt.UTC().Format(time.RFC3339))
		} else {
			fmt.Fprintf(a.io.Out, "extend: %s (the lease is no longer this worker's)\n", ext.Outcome)
		}
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
