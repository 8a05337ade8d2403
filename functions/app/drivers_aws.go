//go:build herald_aws

package app

// The AWS build (the Lambda bootstrap) links the in-memory driver and
// SNS/SQS only; RabbitMQ (Amazon MQ) and NATS users take the default build.
import (
	_ "github.com/heraldevents/herald/pubsubx/awssnssqs" // awssnssqs:// topic URLs
	_ "github.com/heraldevents/herald/pubsubx/mem"       // mem:// topic URLs
)
