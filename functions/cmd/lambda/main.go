// Command lambda is Herald's AWS Lambda bootstrap (runtime provided.al2023,
// built as "bootstrap" with CGO_ENABLED=0 -tags lambda.norpc; `make
// lambda`). HERALD_FUNCTION chooses the routes it serves; the other
// variables are in README "Configuration". The broker and the store are
// opened once, at init, and shared by every invocation of the process.
//
// It accepts API Gateway HTTP API (payload 2.0) events and, for the jobs
// function, {"job": "lease-expiry"} from an EventBridge Scheduler schedule
// (see package functions/lambdafn).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/lambdafn"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h, err := setup(context.Background(), logger, os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
	lambda.Start(h)
}

// setup reads the configuration and opens the function's backends.
func setup(ctx context.Context, logger *slog.Logger, lookup func(string) (string, bool)) (*lambdafn.Handler, error) {
	cfg, err := config.Load(config.Lambda, lookup)
	if err != nil {
		return nil, err
	}
	a, err := app.Open(ctx, cfg, app.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	logger.Info("herald function ready", "function", cfg.Function)
	return lambdafn.New(a.Handler(), func(ctx context.Context, name string) (any, error) {
		return a.RunJob(ctx, name)
	}), nil
}
