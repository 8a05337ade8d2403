package config

import (
	"fmt"
	"strings"
)

// Function names a set of routes that one deployment unit serves
// (HERALD_FUNCTION); package router mounts them.
type Function string

// The functions. All serves every route.
const (
	Publish      Function = "publish"
	Pull         Function = "pull"
	Acknowledge  Function = "acknowledge"
	Destinations Function = "destinations"
	Jobs         Function = "jobs"
	// Websocket serves no REST route but GET /health: it is the API
	// Gateway WebSocket API's integration on AWS (package
	// functions/wslambda), driven by $connect, $default and $disconnect
	// events, not HTTP requests. All serves those events too.
	Websocket Function = "websocket"
	All       Function = "all"
)

// Functions lists every function but All, in a stable order. The notifications API's
// consumer routes join the function of their kind: the SSE streams are
// served by Pull (consuming), durable-queue and dead-letter management by
// Destinations. The streams need a server that does not buffer responses
// (the local adapter, Cloud Run).
func Functions() []Function {
	return []Function{Publish, Pull, Acknowledge, Destinations, Jobs, Websocket}
}

// ParseFunction returns the Function named s, or an error listing the
// known names.
func ParseFunction(s string) (Function, error) {
	names := make([]string, 0, 7)
	for _, f := range append(Functions(), All) {
		if string(f) == s {
			return f, nil
		}
		names = append(names, string(f))
	}
	return "", fmt.Errorf("unknown function %q (known: %s)", s, strings.Join(names, ", "))
}

// Serves reports whether f serves the routes of g: its own, or every
// route when either is All.
func (f Function) Serves(g Function) bool { return f == All || g == All || f == g }

// UsesBroker reports whether f's routes reach the message broker. Jobs
// does: the idle-queue reaper deletes the subscriptions of the queues it
// reaps; so does Websocket, whose streams pull from subscriptions and make
// those of fresh non-durable queues.
func (f Function) UsesBroker() bool {
	switch f {
	case Publish, Pull, Destinations, Jobs, Websocket, All:
		return true
	}
	return false
}

// UsesStore reports whether f's routes reach the lease store. Publish
// does: an event too big for a size-limited broker (Amazon SNS) is stored
// there as a claim-check claim (package delivery).
func (f Function) UsesStore() bool {
	switch f {
	case Publish, Pull, Acknowledge, Destinations, Jobs, Websocket, All:
		return true
	}
	return false
}
