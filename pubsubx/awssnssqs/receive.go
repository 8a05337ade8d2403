package awssnssqs

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
)

func (b *broker) Receive(ctx context.Context, name string, p driver.ReceiveParams) ([]*pubsubx.Message, error) {
	max, wait := p.Max, p.Wait
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if max < 1 {
		return nil, herr.New(herr.InvalidArgument, "receive: max must be at least 1")
	}
	qurl, err := b.queueURL(ctx, name)
	if err != nil {
		return nil, b.forget(name, err)
	}
	end := time.Now().Add(wait)
	var got []sqstypes.Message
	// Wait for the first messages: long polls while wait lasts.
	for polls := 0; len(got) == 0; polls++ {
		waitSecs := pollSeconds(ctx, time.Until(end))
		if polls > 0 && (waitSecs == 0 || ctx.Err() != nil) {
			break // less than a poll's worth of wait or ctx is left: do not spin
		}
		got, err = b.receiveOnce(ctx, qurl, min(maxBatch, max), waitSecs)
		if err != nil {
			return nil, b.forget(name, mapErr(err, subject(name)))
		}
		if !time.Now().Before(end) {
			break
		}
	}
	// Then gather, without waiting, what else is there, until a round
	// finds nothing. An error ends the gathering but not the receive: the
	// messages in hand are returned and the next call meets the error.
	for len(got) > 0 && len(got) < max && ctx.Err() == nil {
		more, err := b.gather(ctx, qurl, max-len(got))
		got = append(got, more...)
		if err != nil || len(more) == 0 {
			break
		}
	}
	out := make([]*pubsubx.Message, len(got))
	for i, m := range got {
		out[i] = toMessage(name, m)
	}
	if err := ctx.Err(); err != nil {
		// The caller is gone and will not settle these: make them
		// visible again rather than leave them hidden for the deadline.
		return nil, b.giveBack(ctx, name, out, mapErr(err, "receive"))
	}
	return out, nil
}

// maxGatherCalls bounds the concurrent short polls of one gathering round.
const maxGatherCalls = 10

// gather makes concurrent short polls whose sizes add up to at most need,
// so no more than need messages can come back. It returns whatever the
// calls received, and the first error.
func (b *broker) gather(ctx context.Context, qurl string, need int) ([]sqstypes.Message, error) {
	calls := min(maxGatherCalls, (need+maxBatch-1)/maxBatch)
	results := make([][]sqstypes.Message, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		n := min(maxBatch, need-i*maxBatch)
		wg.Go(func() { results[i], errs[i] = b.receiveOnce(ctx, qurl, n, 0) })
	}
	wg.Wait()
	var out []sqstypes.Message
	for _, r := range results {
		out = append(out, r...)
	}
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// giveBack nacks messages Receive will not return, then returns err.
func (b *broker) giveBack(ctx context.Context, name string, msgs []*pubsubx.Message, err error) error {
	if len(msgs) > 0 {
		_ = b.Nack(context.WithoutCancel(ctx), name, msgs)
	}
	return err
}

// pollSeconds turns the time left into an SQS WaitTimeSeconds: rounded up
// (so a short wait is not a short poll that may miss messages), at most
// 20, and ending before ctx's deadline, since a call cut short by ctx
// could strand the messages it took.
func pollSeconds(ctx context.Context, left time.Duration) int32 {
	if left <= 0 {
		return 0
	}
	secs := int64(math.Ceil(left.Seconds()))
	if dl, ok := ctx.Deadline(); ok {
		secs = min(secs, int64(time.Until(dl)/time.Second)-1)
	}
	return int32(max(0, min(secs, maxWaitTimeSeconds)))
}

// beforePoll runs before every ReceiveMessage call; tests replace it to
// act while a poll is in flight.
var beforePoll = func() {}

// receiveOnce makes one ReceiveMessage call. It is not canceled with ctx
// (see the package doc, Delivery semantics), only bounded in time.
func (b *broker) receiveOnce(ctx context.Context, qurl string, n int, waitSecs int32) ([]sqstypes.Message, error) {
	beforePoll()
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(waitSecs)*time.Second+receiveSlack)
	defer cancel()
	out, err := b.sqs.ReceiveMessage(callCtx, &sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(qurl),
		MaxNumberOfMessages:   int32(n),
		WaitTimeSeconds:       waitSecs,
		VisibilityTimeout:     b.ackDeadline,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

func toMessage(sub string, m sqstypes.Message) *pubsubx.Message {
	md := make(map[string]string, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		if v.StringValue != nil {
			md[k] = *v.StringValue
		}
	}
	return &pubsubx.Message{
		Body:     []byte(aws.ToString(m.Body)),
		Metadata: md,
		Handle:   &receipt{sub: sub, handle: aws.ToString(m.ReceiptHandle)},
	}
}

func (b *broker) Ack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, true)
}

func (b *broker) Nack(ctx context.Context, name string, msgs []*pubsubx.Message) error {
	return b.settle(ctx, name, msgs, false)
}

// settle deletes (ack) or makes visible (nack) msgs, in batches of 10 sent
// concurrently. Entries SQS reports as already settled or expired are
// ignored: settling twice is harmless.
func (b *broker) settle(ctx context.Context, name string, msgs []*pubsubx.Message, ack bool) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	// The subscription must exist (herr.NotFound) before its handles are
	// judged; its queue URL is cached, so this costs no call as a rule.
	qurl, err := b.queueURL(ctx, name)
	if err != nil {
		return b.forget(name, err)
	}
	rs := make([]*receipt, len(msgs))
	for i, m := range msgs {
		r, ok := m.Handle.(*receipt)
		if !ok || r == nil {
			return herr.New(herr.InvalidArgument, "%s: message was not received from this broker", Scheme)
		}
		if r.sub != name {
			return herr.New(herr.InvalidArgument, "%s: message was received from subscription %q, not %q", Scheme, r.sub, name)
		}
		rs[i] = r
	}
	errs := make([]error, (len(rs)+maxBatch-1)/maxBatch)
	var wg sync.WaitGroup
	for i := range errs {
		chunk := rs[i*maxBatch : min(len(rs), (i+1)*maxBatch)]
		wg.Go(func() { errs[i] = b.settleBatch(ctx, qurl, chunk, ack) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return b.forget(name, mapErr(err, subject(name)))
		}
	}
	return nil
}

// settleBatch settles up to 10 receipts of one queue in one call.
func (b *broker) settleBatch(ctx context.Context, queueURL string, rs []*receipt, ack bool) error {
	qurl := aws.String(queueURL)
	var failed []batchFailure
	if ack {
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(rs))
		for i, r := range rs {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.handle)}
		}
		out, err := b.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: qurl, Entries: entries})
		if err != nil {
			return err
		}
		for _, f := range out.Failed {
			failed = append(failed, batchFailure{aws.ToString(f.Code), aws.ToString(f.Message), f.SenderFault})
		}
	} else {
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(rs))
		for i, r := range rs {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.handle), VisibilityTimeout: 0}
		}
		out, err := b.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: qurl, Entries: entries})
		if err != nil {
			return err
		}
		for _, f := range out.Failed {
			failed = append(failed, batchFailure{aws.ToString(f.Code), aws.ToString(f.Message), f.SenderFault})
		}
	}
	for _, f := range failed {
		switch f.code {
		case "ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidReceiptHandle",
			"AWS.SimpleQueueService.MessageNotInflight":
			// Already deleted, or its deadline passed: nothing to settle.
			continue
		}
		code := herr.Unavailable
		if c, ok := errorCodes[f.code]; ok {
			code = c
		} else if f.senderFault {
			code = herr.InvalidArgument
		}
		return herr.Wrap(code, fmt.Errorf("%s: %s", f.code, f.message), Scheme+": settling messages failed")
	}
	return nil
}

type batchFailure struct {
	code, message string
	senderFault   bool
}
