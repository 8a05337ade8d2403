//go:build herald_gcp

package app

// The Google Cloud build (the Cloud Run server) links the in-memory
// driver, Pub/Sub, and the cloud-neutral RabbitMQ and NATS drivers: a
// container service often reaches a broker run elsewhere, and the two cost
// about 2 MB of a ~23 MB image that has no size limit to meet
// (docs/deploy.md).
import (
	_ "github.com/heraldevents/herald/pubsubx/gcppubsub" // gcppubsub:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/mem"       // mem:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/nats"      // nats:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/rabbit"    // rabbit:// topic URLs
)
