// Package cloudbuild says which of Herald's builds this binary is. The
// build tags choose it:
//
//	(none)      the default build: every broker driver and every store
//	            backend (the local adapter, go test ./..., go build ./...)
//	herald_aws  the AWS build, for the Lambda bootstrap: the mem,
//	            awssnssqs and dynamodb schemes only
//	herald_gcp  the Google Cloud build, for the Cloud Run server: the mem,
//	            gcppubsub, firestore, postgres (Cloud SQL), rabbit and nats
//	            schemes only
//
// The two tags are exclusive: setting both fails to compile. The drivers
// themselves are chosen by build-tagged files in functions/app (topic
// URLs) and leasestore/storeurl (store URLs); this package only names the
// build, so that a URL whose scheme the build leaves out is refused with a
// message saying so (LeftOut) rather than "not supported".
package cloudbuild

import "github.com/heraldevents/herald/herr"

// A Build is one of Herald's builds; Current is this binary's.
type Build string

// Herald's builds.
const (
	Default Build = "default"      // no tag: everything
	AWS     Build = "AWS"          // -tags herald_aws
	GCP     Build = "Google Cloud" // -tags herald_gcp
)

// LeftOut returns the herr.InvalidArgument error for a URL of a scheme
// that Herald has a driver for but this build leaves out. kind names the
// URL ("topic URL", "store URL").
func LeftOut(kind, scheme string) error {
	return herr.New(herr.InvalidArgument, "%s scheme %s is not in this build (built for %s): use the default build, which has every scheme",
		kind, scheme, Current)
}
