package awssnssqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

func (b *broker) CreateSubscription(ctx context.Context, name string, groups filter.Groups) (err error) {
	if err := b.check(ctx); err != nil {
		return err
	}
	if name == "" {
		return herr.New(herr.InvalidArgument, "%s: subscription name is empty", Scheme)
	}
	if err := groups.Validate("filter_groups"); err != nil {
		return err
	}
	topicARN, err := b.topicArn(ctx)
	if err != nil {
		return err
	}
	qname := QueueName(b.topic, name)
	qarn, err := queueARN(topicARN, qname)
	if err != nil {
		return err
	}
	// GetQueueUrl gives the common case its answer; the unique policy id
	// below settles a race between two creators (SQS refuses a second
	// CreateQueue whose attributes differ).
	if _, err := b.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(qname)}); err == nil {
		return herr.New(herr.AlreadyExists, "%s: subscription %q already exists", Scheme, name)
	} else if codeOf(err) != herr.NotFound {
		return mapErr(err, subject(name))
	}
	policy, err := queuePolicy(qarn, topicARN)
	if err != nil {
		return err
	}
	tags := map[string]string{tagTopic: b.topic}
	if tagValuePattern.MatchString(name) {
		tags[tagSubscription] = name
	}
	created, err := b.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(qname),
		Attributes: map[string]string{
			string(sqstypes.QueueAttributeNameVisibilityTimeout):      strconv.Itoa(int(b.ackDeadline)),
			string(sqstypes.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(int(MessageRetention / time.Second)),
			string(sqstypes.QueueAttributeNamePolicy):                 policy,
		},
		Tags: tags,
	})
	if err != nil {
		return mapErr(err, subject(name))
	}
	qurl := aws.ToString(created.QueueUrl)
	defer func() {
		if err != nil {
			// Undo a half-made subscription, even if ctx is gone, so that
			// a retry can create it afresh.
			b.rollback(context.WithoutCancel(ctx), topicARN, qarn, qurl)
		}
	}()
	subARN, err := b.subscribe(ctx, topicARN, qarn, groups)
	if err != nil {
		return mapErr(err, subject(name))
	}
	if tagValuePattern.MatchString(subARN) {
		// Lets Update and Delete find the subscription without listing the
		// topic's subscriptions. Without the tag they list them instead.
		_, _ = b.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(qurl), Tags: map[string]string{tagSubscriptionARN: subARN}})
	}
	b.queueURLs.Store(name, qurl)
	return nil
}

// queuePolicy lets only the topic send to the queue. Its Id is unique per
// call, so two concurrent CreateQueue calls for one name cannot both
// succeed.
func queuePolicy(queueARN, topicARN string) (string, error) {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", herr.Wrap(herr.Internal, err, Scheme+": no randomness")
	}
	p := map[string]any{
		"Version": "2012-10-17",
		"Id":      "herald-" + hex.EncodeToString(nonce[:]),
		"Statement": []map[string]any{{
			"Sid":       "HeraldTopicSends",
			"Effect":    "Allow",
			"Principal": map[string]string{"Service": "sns.amazonaws.com"},
			"Action":    "sqs:SendMessage",
			"Resource":  queueARN,
			"Condition": map[string]any{"ArnEquals": map[string]string{"aws:SourceArn": topicARN}},
		}},
	}
	bs, err := json.Marshal(p)
	if err != nil {
		return "", herr.Wrap(herr.Internal, err, Scheme+": queue policy")
	}
	return string(bs), nil
}

// rollback removes a queue whose subscription could not be completed:
// unsubscribe first, since a subscription to a missing queue is left
// behind otherwise.
func (b *broker) rollback(ctx context.Context, topicARN, qarn, qurl string) {
	if arn, err := b.findSubscription(ctx, topicARN, qarn, qurl); err == nil && arn != "" {
		_, _ = b.sns.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: aws.String(arn)})
	}
	_, _ = b.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(qurl)})
}

// subscribe subscribes the queue with the most exact filter policy SNS
// accepts (see filterPolicies) and returns the subscription ARN.
func (b *broker) subscribe(ctx context.Context, topicARN, qarn string, groups filter.Groups) (string, error) {
	var lastErr error
	for _, p := range filterPolicies(groups) {
		attrs := map[string]string{"RawMessageDelivery": "true"}
		if p != "" {
			attrs["FilterPolicyScope"] = "MessageAttributes"
			attrs["FilterPolicy"] = p
		}
		out, err := b.sns.Subscribe(ctx, &sns.SubscribeInput{
			TopicArn:              aws.String(topicARN),
			Protocol:              aws.String("sqs"),
			Endpoint:              aws.String(qarn),
			Attributes:            attrs,
			ReturnSubscriptionArn: true,
		})
		if err == nil {
			return aws.ToString(out.SubscriptionArn), nil
		}
		if p == "" || !policyRefused(err) {
			return "", err
		}
		lastErr = err
	}
	return "", lastErr // unreachable: the last policy is ""
}

// policyRefused reports an error that a coarser filter policy may avoid:
// the per-topic filter policy quota, or SNS finding the policy invalid
// (its own complexity count, which emulators compute differently).
func policyRefused(err error) bool {
	switch c := apiCode(err); c {
	case "FilterPolicyLimitExceeded":
		return true
	case "InvalidParameter", "InvalidParameterValue", "ParameterValueInvalid":
		return strings.Contains(err.Error(), "FilterPolicy")
	}
	return false
}

// findSubscription returns the ARN of the topic's subscription delivering
// to the queue: from the queue's tag if set, else by listing the topic's
// subscriptions. It returns "" without error when there is none.
func (b *broker) findSubscription(ctx context.Context, topicARN, qarn, qurl string) (string, error) {
	tags, err := b.sqs.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(qurl)})
	if err != nil {
		return "", err
	}
	if arn := tags.Tags[tagSubscriptionARN]; arn != "" {
		return arn, nil
	}
	var token *string
	for {
		out, err := b.sns.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(topicARN), NextToken: token})
		if err != nil {
			return "", err
		}
		for _, s := range out.Subscriptions {
			if aws.ToString(s.Protocol) == "sqs" && aws.ToString(s.Endpoint) == qarn {
				return aws.ToString(s.SubscriptionArn), nil
			}
		}
		if out.NextToken == nil || *out.NextToken == "" {
			return "", nil
		}
		token = out.NextToken
	}
}

// located is a subscription's queue and SNS subscription.
type located struct {
	topicARN, queueURL, queueARN, subARN string
}

func (b *broker) locate(ctx context.Context, name string) (*located, error) {
	topicARN, err := b.topicArn(ctx)
	if err != nil {
		return nil, err
	}
	qurl, err := b.queueURL(ctx, name)
	if err != nil {
		return nil, b.forget(name, err)
	}
	qarn, err := queueARN(topicARN, QueueName(b.topic, name))
	if err != nil {
		return nil, err
	}
	subARN, err := b.findSubscription(ctx, topicARN, qarn, qurl)
	if err != nil {
		return nil, b.forget(name, mapErr(err, subject(name)))
	}
	return &located{topicARN: topicARN, queueURL: qurl, queueARN: qarn, subARN: subARN}, nil
}

func (b *broker) UpdateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if err := groups.Validate("filter_groups"); err != nil {
		return err
	}
	loc, err := b.locate(ctx, name)
	if err != nil {
		return err
	}
	if loc.subARN == "" {
		// The queue exists but is not subscribed: a creation that crashed
		// half-way. Not repaired here (a concurrent Delete would leave a
		// subscription to a missing queue); delete and create it again.
		return herr.New(herr.NotFound, "%s: subscription %q has a queue but no SNS subscription; delete and create it again", Scheme, name)
	}
	var lastErr error
	for _, p := range filterPolicies(groups) {
		value := p
		if value == "" {
			value = "{}" // SNS removes a policy when set to an empty object
		}
		_, err := b.sns.SetSubscriptionAttributes(ctx, &sns.SetSubscriptionAttributesInput{
			SubscriptionArn: aws.String(loc.subARN),
			AttributeName:   aws.String("FilterPolicy"),
			AttributeValue:  aws.String(value),
		})
		if err == nil {
			return nil
		}
		lastErr = err
		if p == "" || !policyRefused(err) {
			break
		}
	}
	return mapErr(lastErr, subject(name))
}

func (b *broker) DeleteSubscription(ctx context.Context, name string) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	loc, err := b.locate(ctx, name)
	if err != nil {
		return err
	}
	// Unsubscribe before deleting the queue: SNS must not keep delivering
	// to a queue that is gone.
	if loc.subARN != "" {
		if _, err := b.sns.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: aws.String(loc.subARN)}); err != nil && codeOf(err) != herr.NotFound {
			return mapErr(err, subject(name))
		}
	}
	_, err = b.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(loc.queueURL)})
	b.queueURLs.Delete(name)
	return mapErr(err, subject(name))
}
