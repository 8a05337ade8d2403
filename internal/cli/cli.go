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
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/internal/clicontext"
	"github.com/heraldevents/herald/internal/outfmt"
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
	io             IO
	url            string
	token          string
	context        string
	output         string
	template       string
	jq             string
	connectTimeout time.Duration

	format *outfmt.Format // parsed from output, template and jq before a command runs
	// contexts is the contexts file, read once (nil before).
	contexts *clicontext.File
}

// Main runs the herald command with args (without the program name) and
// returns its exit code. An error is printed as one line, "herald: " and
// what went wrong, with a second line saying what to do when there is
// something to do.
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
		fmt.Fprintln(stdio.Err, "herald:", a.describe(err, code))
	}
	switch code {
	case ExitUsage:
		fmt.Fprintln(stdio.Err, "Run 'herald --help' for usage.")
	case ExitRefused:
		fmt.Fprintln(stdio.Err, "Set --token, HERALD_TOKEN or a context's token (herald context add) to a token with the permission.")
	case ExitUnavailable:
		fmt.Fprintf(stdio.Err, "Is Herald running at %s? Start one with 'herald serve', or point at another with --url, HERALD_URL or --context.\n", redactedURL(a.baseURL()))
	}
	var le listenError
	if errors.As(err, &le) {
		fmt.Fprintln(stdio.Err, "Serve on another address with --addr or HERALD_ADDR (e.g. 127.0.0.1:18080, or 127.0.0.1:0 for a free port), or use the Herald already listening there.")
	}
	return code
}

// describe is err as the one line Main prints after "herald: ": a
// failure to connect names the URL and the cause, and the client's own
// "herald client: " and "herald: " prefixes are dropped, so that every
// message reads "herald: what went wrong".
func (a *app) describe(err error, code int) string {
	var he *client.Error
	if code == ExitUnavailable && !errors.As(err, &he) {
		return fmt.Sprintf("cannot reach Herald at %s: %s", redactedURL(a.baseURL()), connectionCause(err))
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "herald client: ", "")
	return strings.TrimPrefix(msg, "herald: ")
}

// connectionCause is the innermost reason a connection failed
// ("connect: connection refused", "lookup nosuch.example: no such host",
// "i/o timeout"), without the URL and method around it.
func connectionCause(err error) string {
	var ge giveUpError
	if errors.As(err, &ge) {
		return connectionCause(ge.last) + fmt.Sprintf(" (gave up after %s)", ge.after)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Sprintf("lookup %s: %s", dns.Name, dns.Err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		if op.Timeout() {
			return "connection timed out"
		}
		return op.Err.Error()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	return strings.ReplaceAll(err.Error(), "herald client: ", "")
}

// redactedURL is raw without a password, for messages.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the configured URL"
	}
	return u.Redacted()
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

The deployment is --url (or HERALD_URL), else the context's (--context,
HERALD_CONTEXT or the one 'herald context use' chose), else ` + DefaultURL + `.
The bearer token is --token (or HERALD_TOKEN), else the context's when its
URL is the one in use, else HERALD_DEV_TOKEN; with none of them, the local
adapter's default token when the URL's host is loopback. 'herald context
show' says which is in use and where it came from.

Output is a table, or -o json, -o yaml, -o template=GO-TEMPLATE (or
--template) or -o jq=EXPRESSION (or --jq), all over the JSON form.

Exit codes: 0 ok, 1 error or some items failed, 2 usage, 3 not found,
4 token refused (401/403), 5 Herald unavailable.`,
		Example: `  herald serve                              # Herald on ` + DefaultURL + `, in memory
  herald publish --type myapp.user.created --resource /users/1 --data '{"id": 1}'
  herald tail --type myapp.user.created     # follow events as they are published
  herald consumers create --type myapp.user.created --max-delivery-attempts 5
  herald pull --consumer ID --ack
  herald consumers list --jq '.[].id'
  herald context add prod --url https://herald.example.com --token-stdin < token.txt
  herald --context prod dlq replay --all`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.parseOutput(cmd)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", "Herald's base URL (env HERALD_URL; default: the context's, else "+DefaultURL+")")
	pf.StringVar(&a.token, "token", "", "bearer token (env HERALD_TOKEN; default: the context's, else HERALD_DEV_TOKEN)")
	pf.StringVar(&a.context, "context", "", "the stored context to use (env HERALD_CONTEXT; default: the one 'herald context use' chose)")
	pf.StringVarP(&a.output, "output", "o", outfmt.Table, outfmt.Usage)
	pf.StringVar(&a.template, "template", "", "format the output with this Go template (as -o template=…)")
	pf.StringVar(&a.jq, "jq", "", "filter the output with this jq expression (as -o jq=…)")
	pf.DurationVar(&a.connectTimeout, "connect-timeout", DefaultConnectTimeout,
		"how long to keep trying to reach Herald before giving up with exit 5")
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "json", "yaml", "template=", "jq="}, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	_ = root.RegisterFlagCompletionFunc("context", a.completeContexts)
	root.AddCommand(a.serveCmd(), a.versionCmd(), a.publishCmd(), a.consumersCmd(), a.pullCmd(),
		a.tailCmd(), a.queuesCmd(), a.dlqCmd(), a.contextCmd(), a.webhooksCmd())
	return root
}

// DefaultConnectTimeout is --connect-timeout's default: how long a
// connection may take to open, and how long a stream keeps reconnecting
// while Herald cannot be reached.
const DefaultConnectTimeout = 10 * time.Second

// parseOutput reads -o, --template and --jq into a.format.
func (a *app) parseOutput(cmd *cobra.Command) error {
	spec := a.output
	for _, f := range []struct{ name, kind, val string }{{"template", outfmt.Template, a.template}, {"jq", outfmt.JQ, a.jq}} {
		if !cmd.Flags().Changed(f.name) {
			continue
		}
		if cmd.Flags().Changed("output") || (f.name == "jq" && cmd.Flags().Changed("template")) {
			return usagef("give one of -o, --template and --jq")
		}
		spec = f.kind + "=" + f.val
	}
	f, err := outfmt.Parse(spec)
	if err != nil {
		return usageError{err}
	}
	if a.connectTimeout <= 0 {
		return usagef("--connect-timeout must be positive")
	}
	a.format = f
	return nil
}

// structured says whether the output is the JSON form (json, yaml,
// template, jq) rather than the command's table.
func (a *app) structured() bool { return a.format != nil && !a.format.IsTable() }

// emit writes v, a command's whole result, in the chosen format; not for
// table.
func (a *app) emit(v any) error { return a.format.Write(a.io.Out, v) }

// emitItem writes v, one item of a stream, in the chosen format.
func (a *app) emitItem(v any) error { return a.format.WriteItem(a.io.Out, v) }

// setting is a value in effect and where it came from, for 'herald
// context show'.
type setting struct {
	value  string
	source string // "--url", "HERALD_URL", `context "prod"`, "default"…
}

// selectedContext is the context in use: its name ("" for none), where the
// name came from, and the context.
func (a *app) selectedContext() (name, source string, c clicontext.Context, err error) {
	switch {
	case a.context != "":
		name, source = a.context, "--context"
	case a.io.Getenv("HERALD_CONTEXT") != "":
		name, source = a.io.Getenv("HERALD_CONTEXT"), "HERALD_CONTEXT"
	}
	f, err := a.loadContexts()
	if err != nil {
		if name == "" && errors.Is(err, clicontext.ErrNoConfigDir) {
			return "", "", c, nil // nowhere to keep contexts, and none asked for
		}
		return "", "", c, err
	}
	if name == "" {
		name, source = f.Current, "herald context use"
	}
	if name == "" {
		return "", "", c, nil
	}
	c, ok := f.Contexts[name]
	if !ok {
		return "", "", c, usagef("context %q does not exist (from %s); 'herald context ls' lists them", name, source)
	}
	return name, source, c, nil
}

// loadContexts reads the contexts file once.
func (a *app) loadContexts() (*clicontext.File, error) {
	if a.contexts != nil {
		return a.contexts, nil
	}
	f, err := clicontext.Load()
	if err != nil {
		return nil, err
	}
	a.contexts = f
	return f, nil
}

// resolve is the URL and token in effect, with their sources. The
// context's token is used only with the context's own URL: a token is
// never sent to a deployment it was not stored for.
func (a *app) resolve() (u, tok setting, ctxName string, err error) {
	name, _, c, err := a.selectedContext()
	if err != nil {
		return u, tok, "", err
	}
	ctxSource := fmt.Sprintf("context %q", name)
	switch {
	case a.url != "":
		u = setting{a.url, "--url"}
	case a.io.Getenv("HERALD_URL") != "":
		u = setting{a.io.Getenv("HERALD_URL"), "HERALD_URL"}
	case name != "" && c.URL != "":
		u = setting{c.URL, ctxSource}
	default:
		u = setting{DefaultURL, "default"}
	}
	switch {
	case a.token != "":
		tok = setting{a.token, "--token"}
	case a.io.Getenv("HERALD_TOKEN") != "":
		tok = setting{a.io.Getenv("HERALD_TOKEN"), "HERALD_TOKEN"}
	case name != "" && c.Token != "" && u.value == c.URL:
		tok = setting{c.Token, ctxSource}
	case a.io.Getenv("HERALD_DEV_TOKEN") != "":
		tok = setting{a.io.Getenv("HERALD_DEV_TOKEN"), "HERALD_DEV_TOKEN"}
	case loopbackURL(u.value):
		tok = setting{localDevToken, "the local adapter's default (loopback URL)"}
	default:
		tok = setting{"", "none"}
	}
	return u, tok, name, nil
}

// baseURL is the URL in effect (the default when the context cannot be
// read: the error is reported by the command that needs it).
func (a *app) baseURL() string {
	u, _, _, err := a.resolve()
	if err != nil {
		if a.url != "" {
			return a.url
		}
		return DefaultURL
	}
	return u.value
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

// client returns a client of the deployment. Its connections open within
// --connect-timeout.
func (a *app) client() (*client.Client, error) {
	u, tok, _, err := a.resolve()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: a.connectTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = a.connectTimeout
	opts := []client.Option{client.WithUserAgent("herald-cli"), client.WithHTTPClient(&http.Client{Transport: tr})}
	if tok.value != "" {
		opts = append(opts, client.WithToken(tok.value))
	}
	c, err := client.New(u.value, opts...)
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}
