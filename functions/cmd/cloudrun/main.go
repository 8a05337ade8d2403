// Command cloudrun is Herald's Google Cloud Run server: the same handlers
// as the Lambda bootstrap, served on 0.0.0.0:$PORT (default 8080).
// HERALD_FUNCTION chooses the routes it serves (default all); the other
// variables are in docs/configuration.md. The broker and the store are
// opened once at start and shared by every request. On SIGTERM it stops
// accepting requests and lets those in flight finish (Cloud Run allows
// 10 seconds).
//
// `make cloudrun` and the Dockerfile build it with -tags herald_gcp, which
// links only the mem, gcppubsub, rabbit and nats topic drivers and the
// mem and firestore stores (internal/cloudbuild); built without the tag it
// opens every scheme.
//
// Logs are JSON lines with Cloud Logging's "severity" and "message" keys.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/internal/proclog"
	"github.com/heraldevents/herald/internal/telemetry"
)

// shutdownGrace is how long requests in flight may run after SIGTERM.
const shutdownGrace = 8 * time.Second

// telemetryGrace bounds the last export of spans and metrics on exit.
const telemetryGrace = time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: cloudLogging}))
	if err := run(ctx, logger, os.LookupEnv, nil); err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done. ready, if set, is told the address once
// the server listens.
func run(ctx context.Context, logger *slog.Logger, lookup func(string) (string, bool), ready func(addr string)) error {
	cfg, err := config.Load(config.CloudRun, lookup)
	if err != nil {
		return err
	}
	tel, err := telemetry.Setup(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// Within what is left of Cloud Run's 10 s after SIGTERM.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryGrace)
		defer cancel()
		_ = tel.Shutdown(flushCtx)
	}()
	a, err := app.Open(ctx, cfg, app.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer a.Close()
	logger = a.Logger() // HERALD_LOG_LEVEL applied
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("%s: %w", config.EnvPort, err)
	}
	proclog.Install(logger)
	logger.Info("herald listening", "addr", ln.Addr().String(), "function", cfg.Function,
		"topic", config.Redact(cfg.TopicURL), "store", config.Redact(cfg.StoreURL), "auth", cfg.AuthMode(), "telemetry", telemetry.Exporters())
	if ready != nil {
		ready(ln.Addr().String())
	}
	return app.Serve(ctx, ln, a.Handler(), app.ServeOptions{Grace: shutdownGrace, PingInterval: cfg.PingInterval(), Logger: logger,
		Conns: cfg.ConnLimits()})
}

// cloudLogging renames slog's level and msg keys to the ones Cloud
// Logging reads from JSON lines.
func cloudLogging(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		a.Key = "severity"
		if lvl, ok := a.Value.Any().(slog.Level); ok && lvl == slog.LevelWarn {
			a.Value = slog.StringValue("WARNING")
		}
	case slog.MessageKey:
		a.Key = "message"
	}
	return a
}
