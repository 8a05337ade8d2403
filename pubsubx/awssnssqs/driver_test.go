package awssnssqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/pubsubx"
)

// env is one moto_server and raw SNS/SQS clients on it, for the
// driver-specific tests (the shared contract is drivertest's).
type env struct {
	endpoint string
	sns      *sns.Client
	sqs      *sqs.Client
	creds    aws.CredentialsProvider
}

func newEnv(t *testing.T) *env {
	endpoint := emulators.Moto(t)
	creds := credentials.NewStaticCredentialsProvider("herald-test", "herald-test", "")
	cfg := aws.Config{Region: "us-east-1", Credentials: creds}
	return &env{
		endpoint: endpoint,
		creds:    creds,
		sns:      sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		sqs:      sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) }),
	}
}

func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// broker opens a broker on a new topic and closes it when the test ends.
func (e *env) broker(t *testing.T, ackDeadline time.Duration) *broker {
	t.Helper()
	b, err := Open(t.Context(), Options{
		Topic: unique("drv"), Region: "us-east-1", Endpoint: e.endpoint,
		AckDeadline: ackDeadline, Credentials: e.creds,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b.Driver().(*broker)
}

// subscribe creates a subscription and deletes it when the test ends.
func subscribe(t *testing.T, b *broker, groups filter.Groups) string {
	t.Helper()
	name := unique("sub")
	require.NoError(t, b.CreateSubscription(t.Context(), name, groups))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.DeleteSubscription(ctx, name); err != nil && herr.CodeOf(err) != herr.NotFound {
			t.Logf("cleanup: deleting %s: %v", name, err)
		}
	})
	return name
}

// drain receives from sub until a receive comes back empty, acking
// everything, and returns the messages by event_id.
func drain(t *testing.T, b *broker, sub string) map[string]*pubsubx.Message {
	t.Helper()
	got := map[string]*pubsubx.Message{}
	for {
		msgs, err := b.Receive(t.Context(), sub, pubsubx.ReceiveParams{Max: 10, Wait: time.Second})
		require.NoError(t, err)
		if len(msgs) == 0 {
			return got
		}
		require.NoError(t, b.Ack(t.Context(), sub, msgs))
		for _, m := range msgs {
			got[m.Metadata[pubsubx.AttrEventID]] = m
		}
	}
}

// subscriptionAttrs returns the SNS attributes of sub's subscription.
func (e *env) subscriptionAttrs(t *testing.T, b *broker, sub string) map[string]string {
	t.Helper()
	loc, err := b.locate(t.Context(), sub)
	require.NoError(t, err)
	require.NotEmpty(t, loc.subARN, "subscription %s has no SNS subscription", sub)
	out, err := e.sns.GetSubscriptionAttributes(t.Context(), &sns.GetSubscriptionAttributesInput{SubscriptionArn: aws.String(loc.subARN)})
	require.NoError(t, err)
	return out.Attributes
}

func TestDriver(t *testing.T) {
	e := newEnv(t)
	t.Run("FilterPushdown", func(t *testing.T) { testFilterPushdown(t, e) })
	t.Run("QueueSettings", func(t *testing.T) { testQueueSettings(t, e) })
	t.Run("ReceiveGathersBeyondTen", func(t *testing.T) { testReceiveGathers(t, e) })
	t.Run("CanceledReceiveGivesBack", func(t *testing.T) { testCanceledReceive(t, e) })
	t.Run("SendLimits", func(t *testing.T) { testSendLimits(t, e) })
	t.Run("ForeignHandles", func(t *testing.T) { testForeignHandles(t, e) })
	t.Run("HalfMadeSubscription", func(t *testing.T) { testHalfMade(t, e) })
	t.Run("SubscriptionFoundWithoutTag", func(t *testing.T) { testWithoutTag(t, e) })
	t.Run("LongSubscriptionName", func(t *testing.T) { testLongName(t, e) })
	t.Run("URL", func(t *testing.T) { testURL(t, e) })
}

// pushdownEvent is an event of the pushdown corpus; resourceID "" is sent
// without the resource_id attribute.
type pushdownEvent struct{ eventType, resourceID string }

var pushdownCorpus = func() []pushdownEvent {
	var out []pushdownEvent
	for _, et := range []string{"a", "b", "c"} {
		for _, id := range []string{"", "/users/7", "/users/7/photos", "/users", "/usersx/1", "/ü/路", `/q"x`, "x"} {
			out = append(out, pushdownEvent{et, id})
		}
	}
	return out
}()

// testFilterPushdown: the policy SNS applies is one of filterPolicies'
// candidates (the exact one when the emulator accepts it), the queue gets
// exactly what that policy passes, and that is never less than
// filter.Match passes. Then UpdateSubscription re-filters in place.
func testFilterPushdown(t *testing.T, e *env) {
	b := e.broker(t, 0)
	cases := []struct {
		name   string
		groups filter.Groups
		exact  bool // the emulator accepts the exact policy
	}{
		{"none", nil, true},
		{"typeonly", filter.Groups{grp("a")}, true},
		{"eq", filter.Groups{grp("a", eq("/users/7"))}, true},
		{"greedy", filter.Groups{grp("a", greedy("/users"))}, true},
		{"lazy", filter.Groups{grp("a", lazy("/users/"))}, true},
		{"greedyempty", filter.Groups{grp("b", greedy(""))}, true},
		{"quote", filter.Groups{grp("a", eq(`/q"x`))}, true},
		{"or", filter.Groups{grp("a", eq("/users/7")), grp("b")}, true},
		// moto multiplies "$or" branches where SNS adds them, and refuses
		// this one as too complex: the flat policy applies instead.
		{"fallback", filter.Groups{grp("a", eq("/users")), grp("b", eq("x")), grp("c", greedy("/u"))}, false},
	}
	subs := make([]string, len(cases))
	for i, c := range cases {
		subs[i] = subscribe(t, b, c.groups)
	}
	sent := map[string]pushdownEvent{}
	for i, ev := range pushdownCorpus {
		id := fmt.Sprintf("ev-%02d", i)
		sent[id] = ev
		md := map[string]string{pubsubx.AttrEventType: ev.eventType, pubsubx.AttrEventID: id, pubsubx.AttrResourceID: ev.resourceID}
		require.NoError(t, b.Send(t.Context(), &pubsubx.Message{Body: []byte(`{"id":"` + id + `"}`), Metadata: md}))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			applied := e.subscriptionAttrs(t, b, subs[i])["FilterPolicy"]
			candidates := filterPolicies(c.groups)
			require.Contains(t, candidates, applied, "applied policy is not a candidate")
			if c.exact {
				require.Equal(t, candidates[0], applied, "the exact policy should apply")
			} else {
				require.NotEqual(t, candidates[0], applied, "fixture: the emulator was expected to refuse the exact policy")
			}
			got := drain(t, b, subs[i])
			for id, ev := range sent {
				passes := evalPolicy(t, applied, ev.eventType, ev.resourceID)
				_, delivered := got[id]
				require.Equal(t, passes, delivered, "%s %q under %s", ev.eventType, ev.resourceID, applied)
				if c.groups.Match(ev.eventType, ev.resourceID) {
					require.True(t, delivered, "matching event %s %q dropped", ev.eventType, ev.resourceID)
				}
			}
		})
	}

	t.Run("Update", func(t *testing.T) {
		sub := subs[1] // typeonly "a"
		send := func(id, et string) {
			require.NoError(t, b.Send(t.Context(), &pubsubx.Message{Body: []byte(`{}`),
				Metadata: map[string]string{pubsubx.AttrEventType: et, pubsubx.AttrEventID: id}}))
		}
		send("held-a", "a")
		require.NoError(t, b.UpdateSubscription(t.Context(), sub, filter.Groups{grp("b")}))
		require.Equal(t, `{"event_type":["b"]}`, e.subscriptionAttrs(t, b, sub)["FilterPolicy"])
		send("later-a", "a")
		send("later-b", "b")
		require.ElementsMatch(t, []string{"held-a", "later-b"}, keys(drain(t, b, sub)))

		require.NoError(t, b.UpdateSubscription(t.Context(), sub, nil), "removing the filter")
		send("all-a", "a")
		send("all-c", "c")
		require.ElementsMatch(t, []string{"all-a", "all-c"}, keys(drain(t, b, sub)))
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// testQueueSettings: what CreateSubscription makes on the server.
func testQueueSettings(t *testing.T, e *env) {
	b := e.broker(t, 6500*time.Millisecond) // rounds up to 7 s
	sub := subscribe(t, b, filter.Groups{grp("a")})
	qurl, err := b.queueURL(t.Context(), sub)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(qurl, "/"+QueueName(b.topic, sub)), "queue URL %s", qurl)

	qa, err := e.sqs.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(qurl), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	require.NoError(t, err)
	require.Equal(t, "7", qa.Attributes["VisibilityTimeout"])
	require.Equal(t, "1209600", qa.Attributes["MessageRetentionPeriod"])
	topicARN, err := b.topicArn(t.Context())
	require.NoError(t, err)
	require.Contains(t, qa.Attributes["Policy"], topicARN, "the queue policy names the topic")
	require.Contains(t, qa.Attributes["Policy"], "sqs:SendMessage")

	tags, err := e.sqs.ListQueueTags(t.Context(), &sqs.ListQueueTagsInput{QueueUrl: aws.String(qurl)})
	require.NoError(t, err)
	require.Equal(t, b.topic, tags.Tags[tagTopic])
	require.Equal(t, sub, tags.Tags[tagSubscription])

	sa := e.subscriptionAttrs(t, b, sub)
	require.Equal(t, "true", sa["RawMessageDelivery"])
	require.Equal(t, "MessageAttributes", sa["FilterPolicyScope"])
	require.Equal(t, tags.Tags[tagSubscriptionARN], sa["SubscriptionArn"])
}

// testReceiveGathers: one Receive returns more than SQS's 10 a call when
// they are waiting, and stops at max.
func testReceiveGathers(t *testing.T, e *env) {
	b := e.broker(t, 0)
	sub := subscribe(t, b, nil)
	for i := range 25 {
		require.NoError(t, b.Send(t.Context(), &pubsubx.Message{Body: []byte(`{}`),
			Metadata: map[string]string{pubsubx.AttrEventType: "a", pubsubx.AttrEventID: fmt.Sprint(i)}}))
	}
	got, err := b.Receive(t.Context(), sub, pubsubx.ReceiveParams{Max: 23, Wait: 2 * time.Second})
	require.NoError(t, err)
	require.Len(t, got, 23, "the emulator returns every visible message, so one Receive gathers 23 over three calls")
	rest, err := b.Receive(t.Context(), sub, pubsubx.ReceiveParams{Max: 100, Wait: 2 * time.Second})
	require.NoError(t, err)
	require.Len(t, rest, 2, "nothing beyond max was kept back")
	require.NoError(t, b.Ack(t.Context(), sub, append(got, rest...)), "acking 25 in three batches")
	require.Empty(t, drain(t, b, sub))
}

// testCanceledReceive: a receive whose ctx is canceled while it polls
// returns the cancellation and leaves what it took visible at once (the
// ack deadline is 60 s; a stranded message would not come back in time).
func testCanceledReceive(t *testing.T, e *env) {
	b := e.broker(t, 0)
	sub := subscribe(t, b, nil)
	// Warm the queue URL cache, so the canceled receive reaches the poll.
	_, err := b.Receive(t.Context(), sub, pubsubx.ReceiveParams{Max: 1, Wait: 0})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	polling := make(chan struct{})
	var once sync.Once
	beforePoll = func() { once.Do(func() { close(polling) }) }
	t.Cleanup(func() { beforePoll = func() {} })
	done := make(chan error, 1)
	go func() {
		msgs, err := b.Receive(ctx, sub, pubsubx.ReceiveParams{Max: 10, Wait: 10 * time.Second})
		if err == nil {
			err = fmt.Errorf("receive returned %d messages and no error", len(msgs))
		}
		done <- err
	}()
	<-polling // the poll is about to start (or in flight): cancel, then feed it
	cancel()
	require.NoError(t, b.Send(t.Context(), &pubsubx.Message{Body: []byte(`{}`),
		Metadata: map[string]string{pubsubx.AttrEventType: "a", pubsubx.AttrEventID: "given-back"}}))
	require.Equal(t, herr.Canceled, herr.CodeOf(<-done))

	got, err := b.Receive(t.Context(), sub, pubsubx.ReceiveParams{Max: 10, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, got, 1, "the message must be receivable at once")
	require.Equal(t, "given-back", got[0].Metadata[pubsubx.AttrEventID])
	require.NoError(t, b.Ack(t.Context(), sub, got))
}

// testSendLimits: the size limit counts attributes, bodies at the limit
// round-trip, and what SNS cannot carry is refused, never altered.
func testSendLimits(t *testing.T, e *env) {
	b := e.broker(t, 0)
	sub := subscribe(t, b, nil)
	ctx := t.Context()
	maxAttrs := map[string]string{
		pubsubx.AttrEventType:  strings.Repeat("t", 255),
		pubsubx.AttrResourceID: strings.Repeat("r", filter.MaxResourceIDLength),
		pubsubx.AttrEventID:    "3f1c6a52-2a8e-4d1b-9a63-0f5e1c7b2d40",
	}
	body := []byte(`"` + strings.Repeat("é", (MaxMessageBytes-2)/2) + `"`)
	require.Len(t, body, MaxMessageBytes)
	require.NoError(t, b.Send(ctx, &pubsubx.Message{Body: body, Metadata: maxAttrs}), "MaxMessageBytes with Herald's largest attributes")
	got := drain(t, b, sub)
	require.Len(t, got, 1)
	require.Equal(t, string(body), string(got[maxAttrs[pubsubx.AttrEventID]].Body))
	require.Equal(t, maxAttrs, got[maxAttrs[pubsubx.AttrEventID]].Metadata)

	attrBytes := 0
	for k, v := range maxAttrs {
		attrBytes += len(k) + len("String") + len(v)
	}
	fits := make([]byte, MaxSNSMessageBytes-attrBytes)
	for i := range fits {
		fits[i] = 'x'
	}
	require.NoError(t, b.Send(ctx, &pubsubx.Message{Body: fits, Metadata: maxAttrs}), "exactly 256 KiB with attributes")
	tooBig := append(fits, 'x')
	requireCode(t, herr.InvalidArgument, b.Send(ctx, &pubsubx.Message{Body: tooBig, Metadata: maxAttrs}), "one byte over 256 KiB")
	require.Len(t, drain(t, b, sub), 1, "only the message that fit arrived")

	for name, m := range map[string]*pubsubx.Message{
		"empty body":     {Body: nil},
		"not UTF-8":      {Body: []byte{'{', 0xff, '}'}},
		"AWS. prefix":    {Body: []byte(`{}`), Metadata: map[string]string{"AWS.x": "v"}},
		"double dot":     {Body: []byte(`{}`), Metadata: map[string]string{"a..b": "v"}},
		"leading dot":    {Body: []byte(`{}`), Metadata: map[string]string{".a": "v"}},
		"space in name":  {Body: []byte(`{}`), Metadata: map[string]string{"a b": "v"}},
		"value not UTF8": {Body: []byte(`{}`), Metadata: map[string]string{"a": "\xff"}},
		"11 attributes": {Body: []byte(`{}`), Metadata: func() map[string]string {
			md := map[string]string{}
			for i := range 11 {
				md[fmt.Sprintf("k%d", i)] = "v"
			}
			return md
		}()},
	} {
		requireCode(t, herr.InvalidArgument, b.Send(ctx, m), name)
	}

	require.NoError(t, b.Send(ctx, &pubsubx.Message{Body: []byte(`{}`),
		Metadata: map[string]string{pubsubx.AttrEventID: "empty-attr", pubsubx.AttrResourceID: ""}}))
	got = drain(t, b, sub)
	require.Equal(t, map[string]string{pubsubx.AttrEventID: "empty-attr"}, got["empty-attr"].Metadata, "an empty attribute arrives missing")
}

// testForeignHandles: settling a message through the wrong subscription,
// or a message this broker never received, is refused.
func testForeignHandles(t *testing.T, e *env) {
	b := e.broker(t, 0)
	one, two := subscribe(t, b, nil), subscribe(t, b, nil)
	require.NoError(t, b.Send(t.Context(), &pubsubx.Message{Body: []byte(`{}`), Metadata: map[string]string{pubsubx.AttrEventID: "x"}}))
	got, err := b.Receive(t.Context(), one, pubsubx.ReceiveParams{Max: 1, Wait: 2 * time.Second})
	require.NoError(t, err)
	require.Len(t, got, 1)
	requireCode(t, herr.InvalidArgument, b.Ack(t.Context(), two, got), "Ack through another subscription")
	requireCode(t, herr.InvalidArgument, b.Nack(t.Context(), one, []*pubsubx.Message{{Body: []byte(`{}`)}}), "Nack of an unreceived message")
	require.NoError(t, b.Ack(t.Context(), one, got))
	require.Len(t, drain(t, b, two), 1, "the other subscription kept its copy")
}

// testHalfMade: a queue without its SNS subscription (a creation that
// crashed half-way) is reported, not silently used, and can be deleted.
func testHalfMade(t *testing.T, e *env) {
	b := e.broker(t, 0)
	name := unique("half")
	_, err := e.sqs.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(QueueName(b.topic, name))})
	require.NoError(t, err)
	requireCode(t, herr.AlreadyExists, b.CreateSubscription(t.Context(), name, nil), "CreateSubscription")
	requireCode(t, herr.NotFound, b.UpdateSubscription(t.Context(), name, nil), "UpdateSubscription")
	require.NoError(t, b.DeleteSubscription(t.Context(), name))
	_, err = e.sqs.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String(QueueName(b.topic, name))})
	requireCode(t, herr.NotFound, mapErr(err, "queue"), "queue after DeleteSubscription")
	require.NoError(t, b.CreateSubscription(t.Context(), name, nil), "the name is free again")
	require.NoError(t, b.DeleteSubscription(t.Context(), name))
}

// testWithoutTag: without the subscription-ARN tag (too long, or lost),
// Update and Delete find the subscription by listing the topic's.
func testWithoutTag(t *testing.T, e *env) {
	b := e.broker(t, 0)
	name := unique("untagged")
	require.NoError(t, b.CreateSubscription(t.Context(), name, filter.Groups{grp("a")}))
	qurl, err := b.queueURL(t.Context(), name)
	require.NoError(t, err)
	_, err = e.sqs.UntagQueue(t.Context(), &sqs.UntagQueueInput{QueueUrl: aws.String(qurl), TagKeys: []string{tagSubscriptionARN}})
	require.NoError(t, err)

	require.NoError(t, b.UpdateSubscription(t.Context(), name, filter.Groups{grp("b")}))
	require.Equal(t, `{"event_type":["b"]}`, e.subscriptionAttrs(t, b, name)["FilterPolicy"])

	topicARN, err := b.topicArn(t.Context())
	require.NoError(t, err)
	require.NoError(t, b.DeleteSubscription(t.Context(), name))
	subs, err := e.sns.ListSubscriptionsByTopic(t.Context(), &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(topicARN)})
	require.NoError(t, err)
	require.Empty(t, subs.Subscriptions, "DeleteSubscription unsubscribes")
	// A send after the delete is still accepted: no subscription points at
	// the deleted queue.
	require.NoError(t, b.Send(t.Context(), &pubsubx.Message{Body: []byte(`{}`)}))
}

// testLongName: Herald's longest durable-queue name works end to end.
func testLongName(t *testing.T, e *env) {
	b := e.broker(t, 0)
	name := "herald-q-" + strings.Repeat("A.b_9-", 33) + "zz"
	require.Len(t, name, 9+200)
	require.NoError(t, b.CreateSubscription(t.Context(), name, nil))
	require.NoError(t, b.Send(t.Context(), &pubsubx.Message{Body: []byte(`{}`), Metadata: map[string]string{pubsubx.AttrEventID: "long"}}))
	require.Contains(t, drain(t, b, name), "long")
	require.NoError(t, b.DeleteSubscription(t.Context(), name))
}

// testURL: the registered scheme opens the same topic from two URLs, and
// bad URLs are refused with herr.InvalidArgument.
func testURL(t *testing.T, e *env) {
	t.Setenv("AWS_ACCESS_KEY_ID", "herald-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "herald-test")
	ctx := t.Context()
	topic := unique("url")
	u := "awssnssqs:///" + topic + "?region=us-east-1&endpoint=" + e.endpoint + "&ackdeadline=5s"
	b1, err := pubsubx.Open(ctx, u)
	require.NoError(t, err)
	defer b1.Close()
	b2, err := pubsubx.Open(ctx, "awssnssqs://"+topic+"?region=us-east-1&endpoint="+e.endpoint)
	require.NoError(t, err, "host form")
	defer b2.Close()
	require.Equal(t, int32(5), b1.Driver().(*broker).ackDeadline)
	require.Equal(t, int32(60), b2.Driver().(*broker).ackDeadline)

	sub := unique("sub")
	require.NoError(t, b1.CreateSubscription(ctx, sub, nil))
	require.NoError(t, b2.Send(ctx, &pubsubx.Message{Body: []byte(`{}`), Metadata: map[string]string{pubsubx.AttrEventID: "via-url"}}))
	got := drain(t, b1.Driver().(*broker), sub)
	require.Contains(t, got, "via-url")
	require.NoError(t, b2.DeleteSubscription(ctx, sub))

	for _, bad := range []string{
		"awssnssqs:///" + topic + "?region=us-east-1&color=red",
		"awssnssqs:///" + topic + "?ackdeadline=abc",
		"awssnssqs:///" + topic + "?ackdeadline=-1s",
		"awssnssqs:///" + topic + "?ackdeadline=13h",
		"awssnssqs:///bad.name?region=us-east-1",
		"awssnssqs:///?region=us-east-1",
		"awssnssqs:///" + topic + "?region=us-east-1&endpoint=not-a-url",
	} {
		_, err := pubsubx.Open(ctx, bad)
		requireCode(t, herr.InvalidArgument, err, bad)
	}

	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_PROFILE", "")
	_, err = pubsubx.Open(ctx, "awssnssqs:///"+topic)
	requireCode(t, herr.InvalidArgument, err, "no region anywhere")
}

func requireCode(t *testing.T, want herr.Code, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	require.Equal(t, want.String(), herr.CodeOf(err).String(), "%s: %v", what, err)
}

// TestCodeOf pins the error table's main rows and the fallbacks.
func TestCodeOf(t *testing.T) {
	api := func(code string, fault smithy.ErrorFault) error {
		return fmt.Errorf("operation error: %w", &smithy.GenericAPIError{Code: code, Message: "m", Fault: fault})
	}
	for _, tc := range []struct {
		err  error
		want herr.Code
	}{
		{api("AWS.SimpleQueueService.NonExistentQueue", smithy.FaultClient), herr.NotFound},
		{api("QueueDoesNotExist", smithy.FaultClient), herr.NotFound},
		{api("NotFound", smithy.FaultClient), herr.NotFound},
		{api("QueueNameExists", smithy.FaultClient), herr.AlreadyExists},
		{api("QueueAlreadyExists", smithy.FaultClient), herr.AlreadyExists},
		{api("QueueDeletedRecently", smithy.FaultClient), herr.Unavailable},
		{api("Throttling", smithy.FaultClient), herr.Unavailable},
		{api("RequestThrottled", smithy.FaultClient), herr.Unavailable},
		{api("InternalError", smithy.FaultServer), herr.Unavailable},
		{api("SomethingNew", smithy.FaultServer), herr.Unavailable},
		{api("SomethingNew", smithy.FaultClient), herr.Unknown},
		{api("InvalidParameter", smithy.FaultClient), herr.InvalidArgument},
		{api("InvalidParameterValue", smithy.FaultClient), herr.InvalidArgument},
		{api("InvalidMessageContents", smithy.FaultClient), herr.InvalidArgument},
		{api("FilterPolicyLimitExceeded", smithy.FaultClient), herr.ResourceExhausted},
		{api("AuthorizationError", smithy.FaultClient), herr.Internal},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, herr.Unavailable},
		{fmt.Errorf("send: %w", context.Canceled), herr.Canceled},
		{fmt.Errorf("send: %w", context.DeadlineExceeded), herr.DeadlineExceeded},
	} {
		require.Equal(t, tc.want.String(), codeOf(tc.err).String(), "%v", tc.err)
		mapped := mapErr(tc.err, "thing")
		require.Equal(t, tc.want, herr.CodeOf(mapped))
		require.NotContains(t, herr.MessageOf(mapped), "operation error", "the AWS text stays in the cause")
	}
	require.NoError(t, mapErr(nil, "x"))
	require.True(t, policyRefused(api("InvalidParameter", smithy.FaultClient)) == false, "an unrelated InvalidParameter is not a policy refusal")
	require.True(t, policyRefused(fmt.Errorf("x: %w", &smithy.GenericAPIError{Code: "InvalidParameter", Message: "Invalid parameter: FilterPolicy: Filter policy is too complex"})))
	require.True(t, policyRefused(api("FilterPolicyLimitExceeded", smithy.FaultClient)))
}

// Send sends one message through the driver's SendBatch, for the tests
// of this file that call the driver without the portable layer.
func (b *broker) Send(ctx context.Context, m *pubsubx.Message) error {
	return b.SendBatch(ctx, []*pubsubx.Message{m})[0]
}
