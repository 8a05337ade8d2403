// Command herald is Herald's command-line tool: `herald serve` runs the
// local adapter, and the other commands publish, pull, tail and manage a
// Herald deployment. `herald --help` lists them; package internal/cli
// documents the exit codes.
//
//	go install github.com/heraldevents/herald/cmd/herald@latest
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
	code := cli.Main(ctx, os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
