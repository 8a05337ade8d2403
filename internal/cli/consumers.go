package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
)

func (a *app) consumersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "consumers",
		Aliases: []string{"consumer"},
		Short:   "Manage durable consumers (create, list, get, pause, resume, delete)",
		Long: `A durable consumer is an event destination whose position Herald keeps:
workers pull leased batches from it (herald pull) and acknowledge them. It
starts at the head of the stream when it is created. Needs a token with
manage:destinations.`,
	}
	var ff filterFlags
	var pf policyFlags
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a durable consumer over filters (none: every event), with its delivery policies",
		Long: `create makes a durable consumer over the filter flags (none: every event).
--retry-min-backoff and --retry-max-backoff (whole seconds, 0-600; one
alone takes Herald's default of 10 or 600 for the other) give it a retry
policy: a failed or expired lease waits min·2^(attempt-1), at most max,
before it is redelivered. --max-delivery-attempts (1-1000) gives it a
dead-letter policy: an event is dead-lettered instead of a delivery past
that many (without one, the deployment's HERALD_DELIVERY_LIMIT, 20).`,
		Example: `  herald consumers create --type myapp.user.created
  herald consumers create --type myapp.file.uploaded --prefix /projects/42/
  herald consumers create --type myapp.order.placed --retry-min-backoff 1 --retry-max-backoff 60 --max-delivery-attempts 5
  herald consumers create --filters '[{"event_type":"a.b","filters":[{"filter_type":"eq","resource_id":"/x"}]}]'`,
		Args: exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			gs, err := ff.groups("filters")
			if err != nil {
				return err
			}
			opts := client.ConsumerOptions{FilterGroups: gs}
			if opts.RetryPolicy, err = pf.retryPolicy(cmd); err != nil {
				return err
			}
			if opts.DeadLetterPolicy, err = pf.deadLetterPolicy(cmd); err != nil {
				return err
			}
			return a.withClient(func(c *client.Client) error {
				d, err := c.CreateConsumerWith(cmd.Context(), opts)
				if err != nil {
					return err
				}
				return a.printDestinations(*d)
			})
		}),
	}
	ff.add(create, "filters")
	pf.add(create)

	var upf policyFlags
	var noRetry, noDeadLetter bool
	update := &cobra.Command{
		Use:   "update ID",
		Short: "Change a consumer's retry and dead-letter policies",
		Long: `update changes the delivery policies of a destination; a policy not named
stays as it is. The retry policy (--retry-min-backoff, --retry-max-backoff,
whole seconds 0-600) spaces the redeliveries of failed and expired leases:
attempt n waits min·2^(n-1), at most max. The dead-letter policy
(--max-delivery-attempts, 1-1000) dead-letters an event instead of a
delivery past that many. --no-retry-policy and --no-dead-letter-policy
remove them (redelivery at once; the deployment's delivery limit). The new
values apply from the next pull on.`,
		Example: `  herald consumers update ID --retry-min-backoff 5 --retry-max-backoff 300
  herald consumers update ID --max-delivery-attempts 5
  herald consumers update ID --no-retry-policy`,
		Args:              exactArgs(1, "one consumer id"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			var u client.PolicyUpdate
			var err error
			if u.RetryPolicy, err = upf.retryPolicy(cmd); err != nil {
				return err
			}
			if u.DeadLetterPolicy, err = upf.deadLetterPolicy(cmd); err != nil {
				return err
			}
			u.RemoveRetryPolicy, u.RemoveDeadLetterPolicy = noRetry, noDeadLetter
			switch {
			case noRetry && u.RetryPolicy != nil:
				return usagef("--no-retry-policy excludes the --retry-* flags")
			case noDeadLetter && u.DeadLetterPolicy != nil:
				return usagef("--no-dead-letter-policy excludes --max-delivery-attempts")
			case !noRetry && !noDeadLetter && u.RetryPolicy == nil && u.DeadLetterPolicy == nil:
				return usagef("update needs a policy flag: --retry-min-backoff, --retry-max-backoff, --max-delivery-attempts, --no-retry-policy or --no-dead-letter-policy")
			}
			return a.withClient(func(c *client.Client) error {
				d, err := c.UpdateConsumer(cmd.Context(), args[0], u)
				if err != nil {
					return err
				}
				return a.printDestinations(*d)
			})
		}),
	}
	upf.add(update)
	update.Flags().BoolVar(&noRetry, "no-retry-policy", false, "remove the retry policy: redeliver at once")
	update.Flags().BoolVar(&noDeadLetter, "no-dead-letter-policy", false, "remove the dead-letter policy: the deployment's delivery limit applies")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the destinations: durable consumers and queues",
		Args:  exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return a.withClient(func(c *client.Client) error {
				ds, err := c.ListConsumers(cmd.Context())
				if err != nil {
					return err
				}
				if a.structured() {
					if ds == nil {
						ds = []client.Destination{}
					}
					return a.emit(ds)
				}
				return a.printDestinations(ds...)
			})
		}),
	}
	one := func(use, short string, f func(*client.Client, *cobra.Command, string) (*client.Destination, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  exactArgs(1, "one consumer id"),
			RunE: run(func(cmd *cobra.Command, args []string) error {
				return a.withClient(func(c *client.Client) error {
					d, err := f(c, cmd, args[0])
					if err != nil {
						return err
					}
					if d == nil {
						if a.structured() {
							return a.emit(map[string]any{"id": args[0], "deleted": true})
						}
						_, err := fmt.Fprintln(a.io.Out, "deleted", args[0])
						return err
					}
					return a.printDestinations(*d)
				})
			}),
		}
	}
	get := one("get", "Show one destination (any consumer or queue id), with its cursor and in-flight count",
		func(c *client.Client, cmd *cobra.Command, id string) (*client.Destination, error) {
			return c.GetConsumer(cmd.Context(), id)
		})
	pause := one("pause", "Stop a consumer handing out leases (acknowledging still works)",
		func(c *client.Client, cmd *cobra.Command, id string) (*client.Destination, error) {
			return c.PauseConsumer(cmd.Context(), id)
		})
	resume := one("resume", "Let a paused consumer hand out leases again",
		func(c *client.Client, cmd *cobra.Command, id string) (*client.Destination, error) {
			return c.ResumeConsumer(cmd.Context(), id)
		})
	del := one("delete", "Delete a consumer and its subscription",
		func(c *client.Client, cmd *cobra.Command, id string) (*client.Destination, error) {
			return nil, c.DeleteConsumer(cmd.Context(), id)
		})
	cmd.AddCommand(create, list, get, update, pause, resume, del)
	return cmd
}

// withClient runs f with a client of the deployment.
func (a *app) withClient(f func(*client.Client) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// printDestinations prints one destination as an object, or rows.
func (a *app) printDestinations(ds ...client.Destination) error {
	if a.structured() && len(ds) == 1 {
		return a.emit(ds[0])
	}
	t := newTable(a.io.Out, "ID", "TYPE", "PAUSED", "IN_FLIGHT", "REQUEUED", "COMMITTED", "POLICIES", "CREATED", "FILTERS")
	for _, d := range ds {
		t.row(d.ID, d.Type, fmt.Sprint(d.Paused), fmt.Sprint(d.InFlight), fmt.Sprint(d.Requeued), orDash(d.Committed),
			policiesText(d), d.CreatedAt.UTC().Format(time.RFC3339), groupsText(d.FilterGroups))
	}
	return t.flush()
}

// policiesText is a one-cell summary of a destination's delivery
// policies: "retry 1-60s,dlq after 5", or "-".
func policiesText(d client.Destination) string {
	var parts []string
	if p := d.RetryPolicy; p != nil {
		parts = append(parts, fmt.Sprintf("retry %d-%ds", p.MinimumBackoff/time.Second, p.MaximumBackoff/time.Second))
	}
	if p := d.DeadLetterPolicy; p != nil {
		parts = append(parts, fmt.Sprintf("dlq after %d", p.MaxDeliveryAttempts))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// policyFlags are the delivery-policy flags of consumers create and
// update.
type policyFlags struct {
	minBackoff, maxBackoff, maxAttempts int
}

// Herald's defaults for a retry policy member that is absent.
const (
	defaultMinBackoff = 10  // seconds
	defaultMaxBackoff = 600 // seconds
	maxBackoff        = 600 // seconds, the most either may be
	maxAttempts       = 1000
)

func (p *policyFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&p.minBackoff, "retry-min-backoff", defaultMinBackoff, "retry policy: the first redelivery's wait in seconds, 0-600")
	f.IntVar(&p.maxBackoff, "retry-max-backoff", defaultMaxBackoff, "retry policy: the longest wait in seconds, 0-600")
	f.IntVar(&p.maxAttempts, "max-delivery-attempts", 0, "dead-letter policy: dead-letter an event instead of a delivery past this many, 1-1000")
}

// retryPolicy is the retry policy the flags give, nil when neither
// backoff flag was given.
func (p *policyFlags) retryPolicy(cmd *cobra.Command) (*client.ConsumerRetryPolicy, error) {
	if !cmd.Flags().Changed("retry-min-backoff") && !cmd.Flags().Changed("retry-max-backoff") {
		return nil, nil
	}
	switch {
	case p.minBackoff < 0 || p.minBackoff > maxBackoff || p.maxBackoff < 0 || p.maxBackoff > maxBackoff:
		return nil, usagef("--retry-min-backoff and --retry-max-backoff must be 0-%d seconds", maxBackoff)
	case p.minBackoff > p.maxBackoff:
		return nil, usagef("--retry-min-backoff (%d) must not be above --retry-max-backoff (%d)", p.minBackoff, p.maxBackoff)
	}
	return &client.ConsumerRetryPolicy{MinimumBackoff: time.Duration(p.minBackoff) * time.Second,
		MaximumBackoff: time.Duration(p.maxBackoff) * time.Second}, nil
}

// deadLetterPolicy is the dead-letter policy the flags give, nil when
// --max-delivery-attempts was not given.
func (p *policyFlags) deadLetterPolicy(cmd *cobra.Command) (*client.DeadLetterPolicy, error) {
	if !cmd.Flags().Changed("max-delivery-attempts") {
		return nil, nil
	}
	if p.maxAttempts < 1 || p.maxAttempts > maxAttempts {
		return nil, usagef("--max-delivery-attempts must be 1-%d", maxAttempts)
	}
	return &client.DeadLetterPolicy{MaxDeliveryAttempts: p.maxAttempts}, nil
}
