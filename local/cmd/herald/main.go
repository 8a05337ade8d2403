// Command herald (local/cmd/herald) runs Herald's local adapter: every
// function on one port. It is `herald serve` of the herald command
// (cmd/herald), kept at this path for the scripts that build it; its
// arguments are serve's (--addr, --help).
//
// Configuration is by environment (docs/configuration.md): HERALD_ADDR
// (default 127.0.0.1:8080), HERALD_DEV_TOKEN (default dev-token),
// HERALD_TOPIC_URL (default mem://herald), HERALD_STORE_URL (default
// mem://herald/key), HERALD_SOURCE (default /herald).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/heraldevents/herald/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, append([]string{"serve"}, os.Args[1:]...), cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
