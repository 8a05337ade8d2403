package app

import (
	"context"
	"slices"

	"gocloud.dev/docstore"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/cloudbuild"
	"github.com/heraldevents/herald/leasestore/storeurl"
	"github.com/heraldevents/herald/pubsubx"
)

// Which broker drivers an entrypoint links depends on the build
// (internal/cloudbuild): drivers_all.go imports every driver under
// pubsubx/ (the default build; app_test.go checks the list against
// pubsubx/), drivers_aws.go only mem and awssnssqs (-tags herald_aws, the
// Lambda bootstrap), drivers_gcp.go mem, gcppubsub, rabbit and nats (-tags
// herald_gcp, the Cloud Run server). Store URLs (mem, dynamodb, firestore)
// are opened by leasestore/storeurl, which splits the same way.

// topicSchemes is every topic URL scheme Herald has a driver for, linked
// or not: a URL of one this build leaves out is refused as such.
var topicSchemes = []string{"awssnssqs", "gcppubsub", "mem", "nats", "rabbit"}

func init() {
	linked := pubsubx.Schemes()
	for _, s := range topicSchemes {
		if !slices.Contains(linked, s) {
			pubsubx.LeaveOut(s, cloudbuild.LeftOut("topic URL", s))
		}
	}
}

// Schemes lists the topic and store URL schemes this build opens, sorted.
func Schemes() (topic, store []string) {
	return pubsubx.Schemes(), storeurl.Schemes()
}

// openStore opens the lease store collection at rawURL.
func openStore(ctx context.Context, rawURL string) (*docstore.Collection, error) {
	return storeurl.Open(ctx, rawURL)
}

func errNoJobs(f config.Function) error {
	return herr.New(herr.NotFound, "HERALD_FUNCTION=%s runs no jobs; invoke the jobs function", f)
}
