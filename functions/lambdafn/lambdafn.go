// Package lambdafn is the AWS Lambda edge of a Herald function: it turns a
// Lambda invocation into a call of the function's plain net/http handler,
// or into a run of a scheduled job. Nothing below it knows about Lambda.
//
// Three event shapes are accepted:
//
//   - an API Gateway HTTP API event, payload format 2.0 (version "2.0"),
//     converted by aws-lambda-go-api-proxy's httpadapter (V2) into an
//     *http.Request and the handler's answer back into an
//     APIGatewayV2HTTPResponse. A handler that writes nothing answers 200,
//     as net/http does.
//   - an API Gateway WebSocket API event (requestContext.eventType
//     CONNECT, MESSAGE or DISCONNECT with a connectionId), when a
//     WebSocket handler is set (WithWebSocket; the websocket and all
//     functions): its APIGatewayProxyResponse is the answer.
//   - {"job": "NAME"}, what an EventBridge Scheduler schedule sends to the
//     jobs function (its target Input). The job runs as
//     jobs.SchedulerPrincipal: Lambda's IAM has already decided who may
//     invoke the function. The answer is the job's JSON result; a failed
//     run is an invocation error, so the scheduler retries it.
//
// Anything else is an invocation error naming the accepted shapes.
package lambdafn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// JobRunner runs a scheduled job by name and returns its JSON-encodable
// result.
type JobRunner func(ctx context.Context, name string) (any, error)

// WebSocketHandler handles one API Gateway WebSocket event (package
// functions/wslambda).
type WebSocketHandler func(ctx context.Context, ev events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error)

// Handler implements lambda.Handler for one Herald function.
type Handler struct {
	http *httpadapter.HandlerAdapterV2
	jobs JobRunner
	ws   WebSocketHandler
}

// WithWebSocket makes h dispatch API Gateway WebSocket events to ws and
// returns h. Without it such an event is ErrUnsupportedEvent.
func (h *Handler) WithWebSocket(ws WebSocketHandler) *Handler {
	h.ws = ws
	return h
}

// New returns the Lambda handler serving h and, when jobs is non-nil,
// scheduled job events.
func New(h http.Handler, jobs JobRunner) *Handler {
	return &Handler{http: httpadapter.NewV2(defaultStatus(h)), jobs: jobs}
}

// probe holds the fields that tell the event shapes apart.
type probe struct {
	Version        string `json:"version"`
	RequestContext struct {
		HTTP struct {
			Method string `json:"method"`
		} `json:"http"`
		EventType    string `json:"eventType"`
		ConnectionID string `json:"connectionId"`
	} `json:"requestContext"`
	Job *string `json:"job"`
}

// ErrUnsupportedEvent is returned for an event of neither accepted shape.
var ErrUnsupportedEvent = errors.New(`unsupported event: want an API Gateway HTTP API event (payload format 2.0), an API Gateway WebSocket event (websocket function) or {"job": "NAME"}`)

// isWebSocket reports whether p is an API Gateway WebSocket event.
func (p *probe) isWebSocket() bool {
	switch p.RequestContext.EventType {
	case "CONNECT", "MESSAGE", "DISCONNECT":
		return p.RequestContext.ConnectionID != ""
	}
	return false
}

// Invoke implements lambda.Handler.
func (h *Handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var p probe
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, ErrUnsupportedEvent
	}
	switch {
	case p.Version == "2.0" && p.RequestContext.HTTP.Method != "":
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("decode API Gateway event: %w", err)
		}
		res, err := h.http.ProxyWithContext(ctx, ev)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	case p.isWebSocket() && h.ws != nil:
		var ev events.APIGatewayWebsocketProxyRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("decode API Gateway WebSocket event: %w", err)
		}
		res, err := h.ws(ctx, ev)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	case p.Job != nil && h.jobs != nil:
		res, err := h.jobs(ctx, *p.Job)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", *p.Job, err)
		}
		return json.Marshal(res)
	case p.Job != nil:
		return nil, errors.New("this function runs no jobs")
	default:
		return nil, ErrUnsupportedEvent
	}
}

// defaultStatus makes a handler that writes nothing answer 200, as
// net/http's server does; the adapter would otherwise fail the invocation.
func defaultStatus(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if !sw.wrote {
			sw.WriteHeader(http.StatusOK)
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}
