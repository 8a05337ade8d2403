package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
)

func (a *app) queuesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "queues",
		Aliases: []string{"queue"},
		Short:   "Manage durable queues (ensure, update, delete)",
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
				if a.json() {
					return printJSON(a.io.Out, q)
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
				if a.json() {
					return printJSON(a.io.Out, map[string]any{"queue_id": args[0], "filter_groups": nonNilGroups(next)})
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
				if a.json() {
					return printJSON(a.io.Out, map[string]any{"queue_id": args[0], "deleted": true})
				}
				_, err := fmt.Fprintln(a.io.Out, "deleted", args[0])
				return err
			})
		}),
	}
	cmd.AddCommand(ensure, update, del)
	return cmd
}

func nonNilGroups(gs []client.FilterGroup) []client.FilterGroup {
	if gs == nil {
		return []client.FilterGroup{}
	}
	return gs
}
