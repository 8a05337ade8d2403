package driver

import (
	"context"
	"time"
)

// Backlog is what one subscription holds that no receiver has taken: the
// lag an operator looks at first (the web console's overview, GET
// /v1/event-destinations/{id}).
type Backlog struct {
	// Messages counts the messages ready for delivery, not in flight. A
	// broker that counts approximately (SQS) gives its approximation.
	Messages int64
	// Oldest is when the oldest ready message was published; the zero
	// time when the broker does not tell (or there is none).
	Oldest time.Time
}

// BacklogReporter is implemented by drivers that can tell a
// subscription's backlog in one bounded call, without receiving from it.
// A subscription that does not exist is herr.NotFound.
type BacklogReporter interface {
	Backlog(ctx context.Context, name string) (Backlog, error)
}
