//go:build !herald_aws && !herald_gcp

package app

// The default build links every broker driver.
import (
	_ "github.com/heraldevents/herald/pubsubx/awssnssqs" // awssnssqs:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/gcppubsub" // gcppubsub:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/mem"       // mem:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/nats"      // nats:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/rabbit"    // rabbit:// topic URLs
)
