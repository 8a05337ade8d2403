package awssnssqs

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/heraldevents/herald/pubsubx/driver"
)

// Backlog implements driver.BacklogReporter with one GetQueueAttributes
// call: ApproximateNumberOfMessages, SQS's own approximation of the
// messages ready in the subscription's queue. SQS tells the age of the
// oldest only as a CloudWatch metric (ApproximateAgeOfOldestMessage), not
// through the queue's API: Oldest stays zero.
func (b *broker) Backlog(ctx context.Context, name string) (driver.Backlog, error) {
	if err := ctx.Err(); err != nil {
		return driver.Backlog{}, err
	}
	u, err := b.queueURL(ctx, name)
	if err != nil {
		return driver.Backlog{}, err
	}
	attr := sqstypes.QueueAttributeNameApproximateNumberOfMessages
	out, err := b.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []sqstypes.QueueAttributeName{attr}})
	if err != nil {
		return driver.Backlog{}, b.forget(name, mapErr(err, subject(name)))
	}
	n, err := strconv.ParseInt(out.Attributes[string(attr)], 10, 64)
	if err != nil {
		n = 0 // an absent or garbled count reads as an empty queue, not a failure
	}
	return driver.Backlog{Messages: n}, nil
}
