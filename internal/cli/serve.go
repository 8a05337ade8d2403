package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/internal/proclog"
	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/internal/version"
	"github.com/heraldevents/herald/local"
)

func (a *app) serveCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run Herald locally: every function on one port, in-memory broker and store by default",
		Long: `serve runs the local adapter: every Herald function on one port, with the
periodic jobs, over in-memory drivers unless HERALD_TOPIC_URL and
HERALD_STORE_URL name others. It is configured by the HERALD_* variables
(docs/configuration.md): HERALD_ADDR (default 127.0.0.1:8080),
HERALD_DEV_TOKEN (default dev-token on a loopback address, none on any
other), … It stops on Ctrl-C or SIGTERM, letting open requests finish.`,
		Example: `  herald serve
  HERALD_ADDR=127.0.0.1:18080 HERALD_DEV_TOKEN=my-secret herald serve
  herald serve --addr 127.0.0.1:0     # a free port; the address is logged`,
		Args: exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			// --addr is read as HERALD_ADDR would be, so that the rules
			// that depend on the address (the built-in development token
			// is for loopback only) see the address served.
			c, err := config.Load(config.Local, func(name string) (string, bool) {
				if name == config.EnvAddr && addr != "" {
					return addr, true
				}
				return os.LookupEnv(name)
			})
			if err != nil {
				return err
			}
			cfg := local.Config{Config: c}
			tel, err := telemetry.Setup(cmd.Context())
			if err != nil {
				return err
			}
			defer shutdownTelemetry(tel)
			srv, err := local.New(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			// One log format for the process: what libraries write
			// through the log package, OpenTelemetry or gRPC goes
			// through the server's slog logger too.
			proclog.Install(srv.Logger())
			err = srv.ListenAndServe(cmd.Context())
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "listen" && op.Err != nil {
				return listenError{addr: c.Addr, cause: op.Err.Error()}
			}
			return err
		}),
	}
	cmd.Flags().StringVar(&addr, "addr", "", "listen address host:port (overrides HERALD_ADDR)")
	return cmd
}

// listenError is serve's failure to open its listening socket: the
// address in use (another Herald on 8080, typically), not one of this
// host's, or a port it may not bind. It is exit 1 with a hint naming
// HERALD_ADDR and --addr. It keeps the *net.OpError out of its chain on
// purpose: Main would take that for a failure to reach a deployment
// (exit 5, "Is Herald running? Start one with 'herald serve'"), which
// misleads someone who has just run herald serve.
type listenError struct {
	addr  string // the address serve tried, e.g. 127.0.0.1:8080
	cause string // the socket error, e.g. "bind: address already in use"
}

func (e listenError) Error() string {
	return fmt.Sprintf("cannot listen on %s: %s", e.addr, e.cause)
}

// shutdownTelemetry flushes what telemetry holds on exit, within 5 s.
func shutdownTelemetry(t *telemetry.Telemetry) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = t.Shutdown(ctx)
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date of this binary",
		Args:  exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			if a.structured() {
				return a.emit(info)
			}
			_, err := fmt.Fprintln(a.io.Out, "herald", info.String())
			return err
		}),
	}
}
