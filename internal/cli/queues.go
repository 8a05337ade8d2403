package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
)

func (a *app) queuesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "queues",
		Aliases: []string{"queue"},
		Short:   "Manage durable queues (list, ensure, update, delete)",
		Long: `A durable queue is a named queue of the notifications API that streams
(herald tail --queue) consume with acknowledgements. Ensure needs
create-durable-queues, update too, delete needs delete-durable-queues. A
queue with no stream attached for the idle window (24 h by default) is
deleted with what it holds.`,
	}
	var ff filterFlags
	ensure := &cobra.Command{
		Use:   "ensure [ID]",
		Short: "Make sure a durable queue exists (no ID: Herald names a new one)",
		Long: `ensure creates the queue over the filter flags, or, when it exists, prints
it with its own filters (created false), whatever filters were given.`,
		Example: `  herald queues ensure orders --type shop.order.placed
  herald queues ensure --type shop.order.placed -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("%s takes at most one queue id", cmd.CommandPath())
			}
			return nil
		},
		RunE: run(func(cmd *cobra.Command, args []string) error {
			gs, err := ff.groups("filters")
			if err != nil {
				return err
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			return a.withClient(func(c *client.Client) error {
				q, err := c.EnsureQueue(cmd.Context(), id, gs)
				if err != nil {
					return err
				}
				if a.structured() {
					return a.emit(q)
				}
				t := newTable(a.io.Out, "QUEUE", "CREATED", "FILTERS")
				t.row(q.ID, fmt.Sprint(q.Created), groupsText(q.FilterGroups))
				return t.flush()
			})
		}),
	}
	ff.add(ensure, "filters")

	var uf filterFlags
	var current string
	update := &cobra.Command{
		Use:   "update ID",
		Short: "Move a durable queue to new filters",
		Long: `update replaces the queue's filters with the filter flags (none: every
event). The change is a compare-and-set against --current-filters (JSON);
without it the queue's filters are read first (which needs
manage:destinations).`,
		Example: `  herald queues update orders --type shop.order.placed --type shop.order.cancelled`,
		Args:    exactArgs(1, "one queue id"),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			next, err := uf.groups("filters")
			if err != nil {
				return err
			}
			return a.withClient(func(c *client.Client) error {
				var cur []client.FilterGroup
				if current != "" {
					if err := json.Unmarshal([]byte(current), &cur); err != nil {
						return usagef("--current-filters is not a JSON array of filter groups: %v", err)
					}
				} else {
					d, err := c.GetConsumer(cmd.Context(), args[0])
					if err != nil {
						return err
					}
					cur = d.FilterGroups
				}
				if err := c.UpdateQueue(cmd.Context(), args[0], cur, next); err != nil {
					return err
				}
				if a.structured() {
					return a.emit(map[string]any{"queue_id": args[0], "filter_groups": nonNilGroups(next)})
				}
				_, err := fmt.Fprintf(a.io.Out, "updated %s: %s\n", args[0], groupsText(next))
				return err
			})
		}),
	}
	uf.add(update, "filters")
	update.Flags().StringVar(&current, "current-filters", "", "the queue's filters now, as JSON (default: read them)")

	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a durable queue and what it holds",
		Args:  exactArgs(1, "one queue id"),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(c *client.Client) error {
				if err := c.DeleteQueue(cmd.Context(), args[0]); err != nil {
					return err
				}
				if a.structured() {
					return a.emit(map[string]any{"queue_id": args[0], "deleted": true})
				}
				_, err := fmt.Fprintln(a.io.Out, "deleted", args[0])
				return err
			})
		}),
	}
	var all bool
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the durable queues (--all: the non-durable ones too), with their sessions and backlog",
		Long: `list shows the queues among the destinations (GET /v1/event-destinations,
which needs manage:destinations): durable queues, and with --all the
non-durable ones, listed with their id cut to 7 characters since the id is
their reconnect token.`,
		Args: exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return a.withClient(func(c *client.Client) error {
				ds, err := c.ListConsumers(cmd.Context())
				if err != nil {
					return err
				}
				qs := []client.Destination{}
				for _, d := range ds {
					if d.Type == typeDurableQueue || (all && d.Type == typeNonDurableQueue) {
						qs = append(qs, d)
					}
				}
				if a.structured() {
					return a.emit(qs)
				}
				t := newTable(a.io.Out, "QUEUE", "TYPE", "SESSIONS", "IN_FLIGHT", "REQUEUED", "POLICIES", "CREATED", "FILTERS")
				for _, q := range qs {
					t.row(q.ID, q.Type, fmt.Sprint(q.LiveSessions), fmt.Sprint(q.InFlight), fmt.Sprint(q.Requeued),
						policiesText(q), q.CreatedAt.UTC().Format(time.RFC3339), groupsText(q.FilterGroups))
				}
				return t.flush()
			})
		}),
	}
	list.Flags().BoolVar(&all, "all", false, "list non-durable queues too")
	cmd.AddCommand(list, ensure, update, del)
	return cmd
}

// Destination types of the queues (see leasestore's TypeDurableQueue).
const (
	typeDurableQueue    = "DURABLE_QUEUE"
	typeNonDurableQueue = "NON_DURABLE_QUEUE"
)

func nonNilGroups(gs []client.FilterGroup) []client.FilterGroup {
	if gs == nil {
		return []client.FilterGroup{}
	}
	return gs
}
