// Package cli is the `herald` command: the local adapter (herald serve),
// and a client of any Herald deployment — publish, pull, tail streams,
// manage durable consumers, durable queues and dead letters — built on
// package client. cmd/herald is its entrypoint; local/cmd/herald runs its
// serve command.
//
// # Exit codes
//
//	0  success
//	1  an error, or some items failed (events not published, dead letters not replayed)
//	2  usage: an unknown command or flag, a missing or bad argument
//	3  not found: the consumer, queue or reconnect token does not exist
//	4  refused: no, wrong or insufficient token (401, 403)
//	5  unavailable: Herald could not be reached, or answered 503, after retries
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
)

// Exit codes (see the package doc).
const (
	ExitOK          = 0
	ExitError       = 1
	ExitUsage       = 2
	ExitNotFound    = 3
	ExitRefused     = 4
	ExitUnavailable = 5
)

// Defaults of the global flags.
const (
	DefaultURL = "http://127.0.0.1:8080"
	// localDevToken is the local adapter's default HERALD_DEV_TOKEN, used
	// when no token is given and --url is DefaultURL.
	localDevToken = "dev-token"
)

// IO is where a command reads and writes; Getenv reads the environment.
type IO struct {
	In     io.Reader
	Out    io.Writer
	Err    io.Writer
	Getenv func(string) string
}

// usageError is a mistake in the command line (exit 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// partialError says some items failed; the summary is already printed.
type partialError struct{ error }

// ranError marks an error a command returned, as opposed to one cobra
// met while parsing the command line.
type ranError struct{ error }

func (e ranError) Unwrap() error { return e.error }

// app holds the global flags and the IO of one run.
type app struct {
	io     IO
	url    string
	token  string
	output string
}

// Main runs the herald command with args (without the program name) and
// returns its exit code.
func Main(ctx context.Context, args []string, stdio IO) int {
	if stdio.Getenv == nil {
		stdio.Getenv = os.Getenv
	}
	a := &app{io: stdio}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	var pe partialError
	if !errors.As(err, &pe) {
		fmt.Fprintln(stdio.Err, "herald:", strings.TrimPrefix(err.Error(), "herald: "))
	}
	if code == ExitUsage {
		fmt.Fprintln(stdio.Err, "Run 'herald --help' for usage.")
	}
	if code == ExitRefused {
		fmt.Fprintln(stdio.Err, "Set --token or HERALD_TOKEN to a token with the permission.")
	}
	return code
}

func exitCode(err error) int {
	var ue usageError
	var re ranError
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case !errors.As(err, &re):
		return ExitUsage // cobra's own: an unknown command or flag
	}
	switch client.StatusCode(err) {
	case http.StatusNotFound:
		return ExitNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return ExitRefused
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return ExitUnavailable
	case 0:
		var he *client.Error
		if !errors.As(err, &he) && isConnectionError(err) {
			return ExitUnavailable
		}
	}
	return ExitError
}

// isConnectionError says whether err is a failure to reach Herald (a
// refused or reset connection, an unknown host, a timeout).
func isConnectionError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// run adapts a command body so that its errors are told apart from
// cobra's parsing errors.
func run(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := f(cmd, args); err != nil {
			return ranError{err}
		}
		return nil
	}
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s", cmd.CommandPath(), names)
		}
		return nil
	}
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "herald",
		Short: "Herald: publish, consume and manage events from the command line",
		Long: `herald runs Herald locally (herald serve) and talks to any Herald deployment:
publish events, pull and tail them, manage durable consumers, durable queues
and dead letters.

The deployment is --url (or HERALD_URL, default ` + DefaultURL + `) and the
bearer token --token (or HERALD_TOKEN, else HERALD_DEV_TOKEN; with neither,
the local adapter's default token when --url is the default).

Exit codes: 0 ok, 1 error or some items failed, 2 usage, 3 not found,
4 token refused (401/403), 5 Herald unavailable.`,
		Example: `  herald serve                              # Herald on ` + DefaultURL + `, in memory
  herald publish --type myapp.user.created --resource /users/1 --data '{"id": 1}'
  herald tail --type myapp.user.created     # follow events as they are published
  herald consumers create --type myapp.user.created
  herald pull --consumer ID --ack
  herald dlq replay --all`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if a.output != "json" && a.output != "table" {
				return usagef("--output must be json or table, not %q", a.output)
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", "Herald's base URL (env HERALD_URL; default "+DefaultURL+")")
	pf.StringVar(&a.token, "token", "", "bearer token (env HERALD_TOKEN, else HERALD_DEV_TOKEN)")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table or json")
	root.AddCommand(a.serveCmd(), a.versionCmd(), a.publishCmd(), a.consumersCmd(), a.pullCmd(),
		a.tailCmd(), a.queuesCmd(), a.dlqCmd())
	return root
}

// baseURL is --url, HERALD_URL or the default.
func (a *app) baseURL() string {
	if a.url != "" {
		return a.url
	}
	if u := a.io.Getenv("HERALD_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// bearer is --token, HERALD_TOKEN, HERALD_DEV_TOKEN, or the local
// adapter's default token when the URL's host is loopback (localhost,
// 127.0.0.0/8 or ::1, any port): `herald serve` listens there, on whichever
// port HERALD_ADDR gives it.
func (a *app) bearer() string {
	for _, t := range []string{a.token, a.io.Getenv("HERALD_TOKEN"), a.io.Getenv("HERALD_DEV_TOKEN")} {
		if t != "" {
			return t
		}
	}
	if loopbackURL(a.baseURL()) {
		return localDevToken
	}
	return ""
}

// loopbackURL says whether raw is a URL whose host is localhost, in
// 127.0.0.0/8 or ::1. A URL that does not parse is not loopback.
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// client returns a client of the deployment.
func (a *app) client() (*client.Client, error) {
	opts := []client.Option{client.WithUserAgent("herald-cli")}
	if t := a.bearer(); t != "" {
		opts = append(opts, client.WithToken(t))
	}
	c, err := client.New(a.baseURL(), opts...)
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

func (a *app) json() bool { return a.output == "json" }
