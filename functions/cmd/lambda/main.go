// Command lambda is Herald's AWS Lambda bootstrap (runtime provided.al2023,
// built as "bootstrap" with CGO_ENABLED=0 -tags lambda.norpc,herald_aws;
// `make lambda`). The herald_aws tag links only the mem, awssnssqs and
// dynamodb drivers (internal/cloudbuild); built without it, it opens every
// scheme (RabbitMQ on Amazon MQ, NATS). HERALD_FUNCTION chooses the routes it serves; the other
// variables are in docs/configuration.md. The broker and the store are
// opened once, at init, and shared by every invocation of the process.
//
// It accepts API Gateway HTTP API (payload 2.0) events; for the jobs
// function, {"job": "lease-expiry"} from an EventBridge Scheduler schedule;
// and for the websocket function (and all) the API Gateway WebSocket API's
// $connect, $default and $disconnect events, answered through the
// management API (see packages functions/lambdafn and functions/wslambda).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/heraldevents/herald/functions/app"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/functions/lambdafn"
	"github.com/heraldevents/herald/functions/wslambda"
	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
	"github.com/heraldevents/herald/internal/proclog"
	"github.com/heraldevents/herald/internal/telemetry"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	tel, err := telemetry.Setup(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
	h, err := setup(context.Background(), logger, os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
	if telemetry.Enabled() {
		lambda.Start(flushing{h, tel})
		return
	}
	lambda.Start(h)
}

// flushTimeout bounds the export at the end of each invocation.
const flushTimeout = 2 * time.Second

// flushing exports spans and metrics before each invocation returns: a
// function is frozen between invocations and sends nothing then, so a
// background batch would wait until the next invocation, or be lost.
// With OTLP to the collector extension on localhost, the flush is one
// loopback round trip.
type flushing struct {
	h   *lambdafn.Handler
	tel *telemetry.Telemetry
}

// Invoke implements lambda.Handler.
func (f flushing) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := f.h.Invoke(ctx, payload)
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	_ = f.tel.ForceFlush(flushCtx)
	return out, err
}

// setup reads the configuration and opens the function's backends.
func setup(ctx context.Context, logger *slog.Logger, lookup func(string) (string, bool)) (*lambdafn.Handler, error) {
	cfg, err := config.Load(config.Lambda, lookup)
	if err != nil {
		return nil, err
	}
	a, err := app.Open(ctx, cfg, app.Options{Logger: logger, Jobs: jobs.Options{CloseStaleConnections: wslambda.CloseStale}})
	if err != nil {
		return nil, err
	}
	logger = a.Logger() // HERALD_LOG_LEVEL applied
	h := lambdafn.New(a.Handler(), func(ctx context.Context, name string) (any, error) {
		return a.RunJob(ctx, name)
	})
	if cfg.Function == config.Websocket || cfg.Function == config.All {
		// Region and credentials for signing management API calls: the
		// Lambda environment's (AWS_REGION, the role's session keys).
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			_ = a.Close()
			return nil, fmt.Errorf("AWS configuration for the API Gateway management API: %w", err)
		}
		ws := wslambda.New(wslambda.Config{
			Service: a.Service(), Store: a.Store(), Auth: a.Authenticator(),
			Endpoints: wslambda.FactoryEndpoints(apigwmgmt.NewFactory(awsCfg, lookup)),
			PollWait:  cfg.WSPollWait, SessionTTL: cfg.WSSessionTTL, Logger: logger,
		})
		h.WithWebSocket(ws.Handle)
	}
	proclog.Install(logger)
	logger.Info("herald function ready", "function", cfg.Function,
		"topic", config.Redact(cfg.TopicURL), "store", config.Redact(cfg.StoreURL), "auth", cfg.AuthMode(), "telemetry", telemetry.Exporters())
	return h, nil
}
