package cli

import (
	"fmt"
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
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a durable consumer over filters (none: every event)",
		Example: `  herald consumers create --type myapp.user.created
  herald consumers create --type myapp.file.uploaded --prefix /projects/42/
  herald consumers create --filters '[{"event_type":"a.b","filters":[{"filter_type":"eq","resource_id":"/x"}]}]'`,
		Args: exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			gs, err := ff.groups("filters")
			if err != nil {
				return err
			}
			return a.withClient(func(c *client.Client) error {
				d, err := c.CreateConsumer(cmd.Context(), gs)
				if err != nil {
					return err
				}
				return a.printDestinations(*d)
			})
		}),
	}
	ff.add(create, "filters")
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
				if a.json() {
					if ds == nil {
						ds = []client.Destination{}
					}
					return printJSON(a.io.Out, ds)
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
						if a.json() {
							return printJSON(a.io.Out, map[string]any{"id": args[0], "deleted": true})
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
	cmd.AddCommand(create, list, get, pause, resume, del)
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

// printDestinations prints one destination as an object (JSON) or rows.
func (a *app) printDestinations(ds ...client.Destination) error {
	if a.json() && len(ds) == 1 {
		return printJSON(a.io.Out, ds[0])
	}
	t := newTable(a.io.Out, "ID", "TYPE", "PAUSED", "IN_FLIGHT", "REQUEUED", "COMMITTED", "CREATED", "FILTERS")
	for _, d := range ds {
		t.row(d.ID, d.Type, fmt.Sprint(d.Paused), fmt.Sprint(d.InFlight), fmt.Sprint(d.Requeued), orDash(d.Committed),
			d.CreatedAt.UTC().Format(time.RFC3339), groupsText(d.FilterGroups))
	}
	return t.flush()
}
