package app

import (
	"context"

	"gocloud.dev/docstore"

	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore/storeurl"
	_ "github.com/heraldevents/herald/pubsubx/awssnssqs" // awssnssqs:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/gcppubsub" // gcppubsub:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/mem"       // mem:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/nats"      // nats:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/rabbit"    // rabbit:// topic URLs
)

// Every broker driver in the tree is imported above for its URL scheme, so
// that every entrypoint opens every scheme (app_test.go checks the list
// against pubsubx/). Store URLs (mem, dynamodb, firestore) are opened by
// leasestore/storeurl.

// openStore opens the lease store collection at rawURL.
func openStore(ctx context.Context, rawURL string) (*docstore.Collection, error) {
	return storeurl.Open(ctx, rawURL)
}

func errNoJobs(f router.Function) error {
	return herr.New(herr.NotFound, "HERALD_FUNCTION=%s runs no jobs; invoke the jobs function", f)
}
