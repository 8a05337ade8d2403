package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
)

// webhooksCmd is `herald webhooks`: webhook destinations, which Herald
// pushes to (docs/webhooks.md). Dead letters of a webhook are replayed
// with `herald dlq replay`, as any destination's.
func (a *app) webhooksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "webhooks",
		Aliases: []string{"webhook"},
		Short:   "Manage webhook destinations (create, get, update, rotate-secret, pause, resume, attempts)",
		Long: `A webhook destination is one whose events Herald POSTs to an HTTPS endpoint,
signed per the Standard Webhooks specification, retrying failed deliveries
on a schedule and dead-lettering those that never succeed (replay them
with herald dlq replay). List and delete webhooks with herald consumers
list and delete. Needs a token with manage:destinations.`,
	}
	var (
		ff        filterFlags
		pf        policyFlags
		url       string
		timeout   int
		maxBatch  int
		rateLimit float64
		ordered   bool
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a webhook destination; prints its signing secret, this once",
		Long: `create makes a webhook destination that POSTs the events the filter flags
select (none: every event) to --url. The answer holds the signing secret
(whsec_…), shown this once: give it to the receiver, which verifies each
delivery with it. --timeout (1-60 s, default 15) bounds an attempt,
--max-batch (1-100, default 1) sends several events per request,
--rate-limit caps deliveries per second, --ordered keeps one delivery in
flight at a time. The policy flags replace the retry schedule and the
number of attempts as for consumers create.`,
		Example: `  herald webhooks create --url https://hooks.example.com/herald --type orders.created
  herald webhooks create --url https://hooks.example.com/herald --ordered --rate-limit 5 -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				return usagef("create needs --url")
			}
			gs, err := ff.groups("filters")
			if err != nil {
				return err
			}
			opts := client.WebhookOptions{URL: url, FilterGroups: gs, MaxBatch: maxBatch, RateLimit: rateLimit, Ordered: ordered,
				Timeout: time.Duration(timeout) * time.Second}
			if opts.RetryPolicy, err = pf.retryPolicy(cmd); err != nil {
				return err
			}
			if opts.DeadLetterPolicy, err = pf.deadLetterPolicy(cmd); err != nil {
				return err
			}
			return a.withClient(func(c *client.Client) error {
				d, secret, err := c.CreateWebhook(cmd.Context(), opts)
				if err != nil {
					return err
				}
				if a.structured() {
					return a.emit(struct {
						client.Destination
						Secret string `json:"secret"`
					}{*d, secret})
				}
				if err := a.printWebhook(*d); err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.io.Out, "\nsigning secret (shown this once): %s\n", secret)
				return err
			})
		}),
	}
	ff.add(create, "filters")
	pf.add(create)
	create.Flags().StringVar(&url, "url", "", "the endpoint (https)")
	create.Flags().IntVar(&timeout, "timeout", 0, "seconds one attempt may take, 1-60 (default 15)")
	create.Flags().IntVar(&maxBatch, "max-batch", 0, "events per request, 1-100 (default 1)")
	create.Flags().Float64Var(&rateLimit, "rate-limit", 0, "the most deliveries per second, 0.001-1000 (default: no limit)")
	create.Flags().BoolVar(&ordered, "ordered", false, "one delivery in flight at a time, in sequence")

	var (
		upf    policyFlags
		u      client.WebhookUpdate
		uURL   string
		uTime  int
		uBatch int
		uRate  float64
		uOrder bool
	)
	update := &cobra.Command{
		Use:   "update ID",
		Short: "Change a webhook's url, timeout, batch size, rate limit, ordering or policies",
		Long: `update changes what its flags name and leaves the rest. Herald checks every
value before it changes anything: a refused url or a value out of range
changes nothing. A new --url closes the circuit breaker and enables a
destination disabled by a 410. --no-rate-limit removes the rate limit;
--ordered=false lets deliveries run concurrently again.`,
		Example: `  herald webhooks update ID --url https://hooks.example.com/v2
  herald webhooks update ID --rate-limit 10 --ordered`,
		Args:              exactArgs(1, "one webhook id"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			var err error
			if u.Policies.RetryPolicy, err = upf.retryPolicy(cmd); err != nil {
				return err
			}
			if u.Policies.DeadLetterPolicy, err = upf.deadLetterPolicy(cmd); err != nil {
				return err
			}
			if fl.Changed("url") {
				u.URL = &uURL
			}
			if fl.Changed("timeout") {
				d := time.Duration(uTime) * time.Second
				u.Timeout = &d
			}
			if fl.Changed("max-batch") {
				u.MaxBatch = &uBatch
			}
			if fl.Changed("rate-limit") {
				if u.RemoveRateLimit {
					return usagef("--no-rate-limit excludes --rate-limit")
				}
				u.RateLimit = &uRate
			}
			if fl.Changed("ordered") {
				u.Ordered = &uOrder
			}
			if u.URL == nil && u.Timeout == nil && u.MaxBatch == nil && u.RateLimit == nil && !u.RemoveRateLimit && u.Ordered == nil &&
				u.Policies.RetryPolicy == nil && u.Policies.DeadLetterPolicy == nil {
				return usagef("update needs a flag: --url, --timeout, --max-batch, --rate-limit, --no-rate-limit, --ordered or a policy flag")
			}
			return a.withClient(func(c *client.Client) error {
				d, err := c.UpdateWebhook(cmd.Context(), args[0], u)
				if err != nil {
					return err
				}
				return a.printWebhook(*d)
			})
		}),
	}
	upf.add(update)
	update.Flags().StringVar(&uURL, "url", "", "the new endpoint (https)")
	update.Flags().IntVar(&uTime, "timeout", 15, "seconds one attempt may take, 1-60")
	update.Flags().IntVar(&uBatch, "max-batch", 1, "events per request, 1-100")
	update.Flags().Float64Var(&uRate, "rate-limit", 0, "the most deliveries per second, 0.001-1000")
	update.Flags().BoolVar(&u.RemoveRateLimit, "no-rate-limit", false, "remove the rate limit")
	update.Flags().BoolVar(&uOrder, "ordered", false, "one delivery in flight at a time, in sequence")

	one := func(use, short string, f func(*client.Client, *cobra.Command, string) (*client.Destination, error)) *cobra.Command {
		return &cobra.Command{
			Use:               use + " ID",
			Short:             short,
			Args:              exactArgs(1, "one webhook id"),
			ValidArgsFunction: cobra.NoFileCompletions,
			RunE: run(func(cmd *cobra.Command, args []string) error {
				return a.withClient(func(c *client.Client) error {
					d, err := f(c, cmd, args[0])
					if err != nil {
						return err
					}
					return a.printWebhook(*d)
				})
			}),
		}
	}
	get := one("get", "Show a webhook: its endpoint, settings, circuit breaker and cursor",
		func(c *client.Client, cmd *cobra.Command, id string) (*client.Destination, error) {
			return c.GetConsumer(cmd.Context(), id)
		})
	pause := one("pause", "Stop pushing to a webhook (its events wait)",
		func(c *client.Client, cmd *cobra.Command, id string) (*client.Destination, error) {
			return c.PauseConsumer(cmd.Context(), id)
		})
	resume := one("resume", "Push to a paused webhook again (also enables one disabled by a 410)",
		func(c *client.Client, cmd *cobra.Command, id string) (*client.Destination, error) {
			return c.ResumeConsumer(cmd.Context(), id)
		})
	rotate := &cobra.Command{
		Use:   "rotate-secret ID",
		Short: "Give a webhook a new signing secret; prints it, this once",
		Long: `rotate-secret issues a new signing secret and prints it, this once. For the
next 24 hours every delivery is signed with the old secret too, so the
receiver can switch without missing one.`,
		Args:              exactArgs(1, "one webhook id"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(c *client.Client) error {
				secret, err := c.RotateWebhookSecret(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if a.structured() {
					return a.emit(map[string]string{"id": args[0], "secret": secret})
				}
				_, err = fmt.Fprintf(a.io.Out, "new signing secret (shown this once): %s\n", secret)
				return err
			})
		}),
	}
	attempts := &cobra.Command{
		Use:   "attempts ID",
		Short: "List a webhook's recent delivery attempts, newest first (the last 100, 24 hours at most)",
		Args:  exactArgs(1, "one webhook id"),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(c *client.Client) error {
				as, err := c.WebhookAttempts(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if a.structured() {
					if as == nil {
						as = []client.WebhookAttempt{}
					}
					return a.emit(as)
				}
				t := newTable(a.io.Out, "AT", "STATUS", "LATENCY", "ATTEMPT", "EVENTS", "WEBHOOK_ID", "DETAIL")
				for _, x := range as {
					status, detail := "-", x.Error
					if x.Status != 0 {
						status, detail = strconv.Itoa(x.Status), oneLine(x.ResponseBody, 60)
					}
					t.row(x.At.UTC().Format(time.RFC3339), status, fmt.Sprintf("%dms", x.LatencyMs), fmt.Sprint(x.Attempt),
						fmt.Sprint(x.Events), x.WebhookID, orDash(&detail))
				}
				return t.flush()
			})
		}),
	}
	cmd.AddCommand(create, get, update, rotate, pause, resume, attempts)
	return cmd
}

// printWebhook prints a webhook destination as an object, or a table of
// its settings.
func (a *app) printWebhook(d client.Destination) error {
	if a.structured() {
		return a.emit(d)
	}
	t := newTable(a.io.Out, "ID", "URL", "TIMEOUT", "MAX_BATCH", "RATE", "ORDERED", "PAUSED", "BREAKER", "IN_FLIGHT", "POLICIES")
	w := d.Webhook
	if w == nil {
		w = &client.WebhookConfig{}
	}
	rate, breaker := "-", "closed"
	if w.RateLimit > 0 {
		rate = strconv.FormatFloat(w.RateLimit, 'g', -1, 64) + "/s"
	}
	switch {
	case w.Disabled != "":
		breaker = "disabled: " + w.Disabled
	case w.CircuitOpenedAt != nil:
		breaker = "open since " + w.CircuitOpenedAt.UTC().Format(time.RFC3339)
	case w.ConsecutiveFailures > 0:
		breaker = fmt.Sprintf("closed, %d failures", w.ConsecutiveFailures)
	}
	t.row(d.ID, w.URL, fmt.Sprintf("%ds", w.TimeoutSeconds), fmt.Sprint(w.MaxBatch), rate, fmt.Sprint(w.Ordered), fmt.Sprint(d.Paused),
		breaker, fmt.Sprint(d.InFlight), policiesText(d))
	return t.flush()
}

// oneLine is s on one line, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
