package cli

import (
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
)

func (a *app) dlqCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Triage the dead-letter queue (list, replay, discard)",
		Long: `Events that passed their delivery limit, their queue's message TTL or its
maximum length, or were rejected (herald pull --reject), are dead-lettered.
Needs inspect-and-replay-all-dlq.`,
	}
	var limit int
	var page string
	var all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, a page at a time (--all: every one)",
		Args:  exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > client.MaxDeadLetterPage {
				return usagef("--limit must be 1-%d", client.MaxDeadLetterPage)
			}
			return a.withClient(func(c *client.Client) error {
				var dls []client.DeadLetter
				next := ""
				if all {
					var err error
					if dls, err = c.AllDeadLetters(cmd.Context()); err != nil {
						return err
					}
				} else {
					p, err := c.ListDeadLetters(cmd.Context(), limit, page)
					if err != nil {
						return err
					}
					dls, next = p.DeadLetters, p.NextPageToken
				}
				if dls == nil {
					dls = []client.DeadLetter{}
				}
				if a.structured() {
					return a.emit(client.DeadLetterPage{DeadLetters: dls, NextPageToken: next})
				}
				t := newTable(a.io.Out, "ID", "REASON", "ORIGIN", "DELIVERIES", "DEAD_LETTERED", "TYPE", "RESOURCE")
				for _, d := range dls {
					t.row(d.ID, d.Reason, d.OriginQueue, fmt.Sprint(d.DeliveryCount), d.DeadLetteredAt.UTC().Format(time.RFC3339),
						d.Event.Type, dash(d.ResourceID))
				}
				if err := t.flush(); err != nil {
					return err
				}
				if next != "" {
					fmt.Fprintf(a.io.Err, "more: --page-token %s\n", next)
				}
				return nil
			})
		}),
	}
	list.Flags().IntVar(&limit, "limit", 20, "dead letters per page, 1-100")
	list.Flags().StringVar(&page, "page-token", "", "the page after the one that printed this token")
	list.Flags().BoolVar(&all, "all", false, "list every dead letter")
	cmd.AddCommand(list,
		a.dlqAction("replay", client.ActionReplay, client.OutcomeReplayed,
			"Replay dead letters onto the exact queue they came from, with a fresh delivery budget",
			`replay puts each dead letter back on the queue it was dead-lettered from,
as a new delivery with a fresh delivery budget.`,
			`An id that is not in the dead-letter queue is REPLAY_FAILED, with a detail
saying so.`),
		a.dlqAction("discard", client.ActionDiscard, client.OutcomeDiscarded,
			"Discard dead letters for good",
			`discard deletes each dead letter for good.`,
			`An id that is not in the dead-letter queue is gone either way: it counts as
DISCARDED, with a detail saying it was not there.`))
	return cmd
}

// dlqAction is `herald dlq replay|discard ID… | --all`: what is the
// action's first paragraph, missing what it does with an id that is not
// there.
func (a *app) dlqAction(name, action, success, short, what, missing string) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   name + " [ID...] | --all",
		Short: short,
		Long: what + `

With --all the whole dead-letter queue is listed first, then acted on, 100
dead letters a call, with a progress bar on a terminal. The summary counts
each outcome, then lists each dead letter whose outcome carries a detail or
is not ` + success + `. ` + missing + `

The exit code is 1 when any dead letter was not ` + success + `, else 0.`,
		Example: "  herald dlq " + name + " 3f1c6a52-2a8e-4d1b-9a63-0f5e1c7b2d40\n  herald dlq " + name + " --all",
		RunE: run(func(cmd *cobra.Command, args []string) error {
			switch {
			case all && len(args) > 0:
				return usagef("give dead-letter ids or --all, not both")
			case !all && len(args) == 0:
				return usagef("%s needs dead-letter ids or --all", cmd.CommandPath())
			}
			return a.withClient(func(c *client.Client) error {
				ids := args
				if all {
					// Every id first: acting while paging would move the pages.
					dls, err := c.AllDeadLetters(cmd.Context())
					if err != nil {
						return err
					}
					ids = make([]string, len(dls))
					for i, d := range dls {
						ids[i] = d.ID
					}
				}
				actions := make([]client.DeadLetterAction, len(ids))
				for i, id := range ids {
					actions[i] = client.DeadLetterAction{ID: id, Action: action}
				}
				bar := newProgress(a.io.Err, len(actions), name)
				outcomes, err := c.ActOnDeadLetters(cmd.Context(), actions, bar.set)
				bar.done()
				if perr := a.printOutcomes(outcomes, len(actions)); perr != nil {
					return perr
				}
				if err != nil {
					return err
				}
				failed := 0
				for _, o := range outcomes {
					if o.Outcome != success {
						failed++
					}
				}
				if failed > 0 {
					return partialError{fmt.Errorf("%d dead letters not %s", failed, success)}
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "every dead letter")
	return cmd
}

// printOutcomes prints the count of each outcome, then every outcome that
// has a detail or is not a success, with its detail: the server's detail
// is the only place it says, for instance, that a discarded id was not
// there.
func (a *app) printOutcomes(outcomes []client.DeadLetterOutcome, asked int) error {
	counts := map[string]int{}
	for _, o := range outcomes {
		counts[o.Outcome]++
	}
	if a.structured() {
		if outcomes == nil {
			outcomes = []client.DeadLetterOutcome{}
		}
		return a.emit(map[string]any{"asked": asked, "counts": counts, "outcomes": outcomes})
	}
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	sort.Strings(names)
	t := newTable(a.io.Out, "OUTCOME", "COUNT")
	for _, k := range names {
		t.row(k, fmt.Sprint(counts[k]))
	}
	if n := asked - len(outcomes); n > 0 {
		t.row("NOT_SENT", fmt.Sprint(n))
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, o := range outcomes {
		success := o.Outcome == client.OutcomeReplayed || o.Outcome == client.OutcomeDiscarded || o.Outcome == client.OutcomeLeft
		switch {
		case o.Detail != "":
			fmt.Fprintf(a.io.Out, "%s: %s: %s\n", o.ID, o.Outcome, o.Detail)
		case !success:
			fmt.Fprintf(a.io.Out, "%s: %s\n", o.ID, o.Outcome)
		}
	}
	return nil
}
