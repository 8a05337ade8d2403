// Command herald runs Herald's local adapter: every function on one port.
//
// Configuration is by environment (README "Configuration"): HERALD_ADDR
// (default 127.0.0.1:8080), HERALD_DEV_TOKEN (default dev-token),
// HERALD_TOPIC_URL (default mem://herald), HERALD_STORE_URL (default
// mem://herald/key), HERALD_SOURCE (default /herald).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/heraldevents/herald/local"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	srv, err := local.New(ctx, local.ConfigFromEnv())
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.ListenAndServe(ctx)
}
