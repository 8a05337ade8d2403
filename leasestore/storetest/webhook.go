package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var webhookCases = []conformanceCase{
	{"Webhook/CreateGetUpdateDelete", testWebhookLifecycle},
	{"Webhook/ConcurrentUpdates", testWebhookConcurrent},
	{"Webhook/List", testWebhookList},
	{"Webhook/Attempts", testWebhookAttempts},
}

// testWebhookList: ListWebhooks returns the webhook records, and only
// them (not the consumers beside them); a deleted record is gone from it.
func testWebhookList(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	ids := []string{"storetest-wh-" + uuid.NewString(), "storetest-wh-" + uuid.NewString()}
	for _, id := range ids {
		_, err := b.store.CreateConsumer(b.ctx, leasestore.Consumer{ID: id, Type: leasestore.TypeWebhook, Subscription: "s-" + id})
		require.NoError(t, err)
		_, err = b.store.CreateWebhook(b.ctx, leasestore.Webhook{Consumer: id, URL: "https://example.com/" + id, Secrets: []leasestore.WebhookSecret{{Secret: "whsec_" + id}}})
		require.NoError(t, err)
	}
	listed := func() map[string]string {
		ws, err := b.store.ListWebhooks(b.ctx)
		require.NoError(t, err)
		out := map[string]string{}
		for _, w := range ws {
			out[w.Consumer] = w.URL
		}
		return out
	}
	got := listed()
	for _, id := range ids {
		require.Equal(t, "https://example.com/"+id, got[id])
	}
	require.NotContains(t, got, b.consumer, "the setup's durable consumer has no webhook record")
	require.NoError(t, b.store.DeleteWebhook(b.ctx, ids[0]))
	got = listed()
	require.NotContains(t, got, ids[0])
	require.Contains(t, got, ids[1])
}

// testWebhookLifecycle: a webhook record reads back as written (secrets in
// order, expiries to the millisecond), a second create is AlreadyExists,
// an update lands, bad records are InvalidArgument with nothing written,
// and a delete (repeated) leaves NotFound.
func testWebhookLifecycle(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	id := "storetest-wh-" + uuid.NewString()
	exp := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli()).UTC()
	w := leasestore.Webhook{
		Consumer: id, URL: "https://example.com/hook?a=b",
		Secrets: []leasestore.WebhookSecret{{Secret: "whsec_current"}, {Secret: "whsec_old", ExpiresAt: exp}},
		Timeout: 15 * time.Second, MaxBatch: 10,
	}
	_, err := b.store.CreateWebhook(b.ctx, w)
	require.NoError(t, err)
	_, err = b.store.CreateWebhook(b.ctx, w)
	requireCode(t, herr.AlreadyExists, err)

	got, err := b.store.GetWebhook(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, w.URL, got.URL)
	require.Equal(t, w.Secrets, got.Secrets)
	require.Equal(t, w.Timeout, got.Timeout)
	require.Equal(t, 10, got.MaxBatch)
	require.Empty(t, got.Disabled)

	require.False(t, got.Ordered)
	require.Zero(t, got.RateLimit)
	require.Zero(t, got.Failures)
	require.True(t, got.OpenedAt.IsZero())

	opened := time.UnixMilli(time.Now().UnixMilli()).UTC()
	up, err := b.store.UpdateWebhook(b.ctx, id, func(w *leasestore.Webhook) error {
		w.Secrets = w.Secrets[:1]
		w.Disabled = "410"
		w.Ordered, w.RateLimit, w.Failures, w.OpenedAt = true, 2.5, 7, opened
		return nil
	})
	require.NoError(t, err)
	require.Len(t, up.Secrets, 1)
	got, err = b.store.GetWebhook(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, "410", got.Disabled)
	require.Len(t, got.Secrets, 1)
	require.True(t, got.Ordered)
	require.InDelta(t, 2.5, got.RateLimit, 1e-9)
	require.Equal(t, 7, got.Failures)
	require.Equal(t, opened, got.OpenedAt)

	_, err = b.store.UpdateWebhook(b.ctx, id, func(w *leasestore.Webhook) error { w.Secrets = nil; return nil })
	requireCode(t, herr.InvalidArgument, err)
	got, err = b.store.GetWebhook(b.ctx, id)
	require.NoError(t, err)
	require.Len(t, got.Secrets, 1, "a refused update writes nothing")

	_, err = b.store.CreateWebhook(b.ctx, leasestore.Webhook{Consumer: id + "x", URL: "https://x"})
	requireCode(t, herr.InvalidArgument, err)

	require.NoError(t, b.store.DeleteWebhook(b.ctx, id))
	require.NoError(t, b.store.DeleteWebhook(b.ctx, id))
	_, err = b.store.GetWebhook(b.ctx, id)
	requireCode(t, herr.NotFound, err)
	_, err = b.store.UpdateWebhook(b.ctx, id, func(*leasestore.Webhook) error { return nil })
	requireCode(t, herr.NotFound, err)
}

// testWebhookConcurrent: updates racing on one record all land (the
// revision-conditional write retries the loser on the winner's result).
func testWebhookConcurrent(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	id := "storetest-wh-" + uuid.NewString()
	_, err := b.store.CreateWebhook(b.ctx, leasestore.Webhook{Consumer: id, URL: "https://example.com", Secrets: []leasestore.WebhookSecret{{Secret: "whsec_0"}}})
	require.NoError(t, err)
	const n = 4
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := b.store.UpdateWebhook(b.ctx, id, func(w *leasestore.Webhook) error {
				w.MaxBatch++
				return nil
			})
			require.NoError(t, err)
		})
	}
	wg.Wait()
	got, err := b.store.GetWebhook(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, n, got.MaxBatch)
}

// testWebhookAttempts: the attempt log reads back newest first, keeps the
// last MaxWebhookAttempts, drops attempts past the retention, bounds the
// body to MaxWebhookAttemptBody bytes of valid UTF-8, and goes with the
// webhook record.
func testWebhookAttempts(t *testing.T, h Harness) {
	b := setup(t, h, setupOptions{})
	id := "storetest-wh-" + uuid.NewString()
	got, err := b.store.WebhookAttempts(b.ctx, id)
	require.NoError(t, err)
	require.Empty(t, got, "none before the first attempt")
	_, err = b.store.CreateWebhook(b.ctx, leasestore.Webhook{Consumer: id, URL: "https://example.com", Secrets: []leasestore.WebhookSecret{{Secret: "whsec_0"}}})
	require.NoError(t, err)

	now := time.UnixMilli(b.clock.Now().UnixMilli()).UTC()
	first := []leasestore.WebhookAttempt{
		{At: now.Add(-25 * time.Hour), WebhookID: "too-old", Attempt: 1, Events: 1, Status: 500},
		{At: now.Add(-time.Hour), WebhookID: "evt-1", Attempt: 1, Events: 2, Status: 503, Latency: 1500 * time.Millisecond,
			Body: strings.Repeat("x", 2000)},
		{At: now.Add(-time.Minute), WebhookID: "evt-2", Attempt: 2, Events: 1, Error: "the endpoint did not answer within the timeout",
			Body: strings.Repeat("y", leasestore.MaxWebhookAttemptBody-1) + "\xe2\x82\xac"},
	}
	require.NoError(t, b.store.AppendWebhookAttempts(b.ctx, id, first))
	got, err = b.store.WebhookAttempts(b.ctx, id)
	require.NoError(t, err)
	require.Len(t, got, 2, "the one past the retention is dropped")
	require.Equal(t, "evt-2", got[0].WebhookID, "newest first")
	require.Equal(t, now.Add(-time.Minute), got[0].At)
	require.EqualValues(t, 2, got[0].Attempt)
	require.Zero(t, got[0].Status)
	require.Equal(t, "the endpoint did not answer within the timeout", got[0].Error)
	require.LessOrEqual(t, len(got[0].Body), leasestore.MaxWebhookAttemptBody+2)
	require.True(t, utf8.ValidString(got[0].Body), "a rune cut in two is replaced")
	require.Equal(t, 503, got[1].Status)
	require.Equal(t, 1500*time.Millisecond, got[1].Latency)
	require.Equal(t, 2, got[1].Events)
	require.Equal(t, strings.Repeat("x", leasestore.MaxWebhookAttemptBody), got[1].Body)

	var many []leasestore.WebhookAttempt
	for i := range leasestore.MaxWebhookAttempts + 5 {
		many = append(many, leasestore.WebhookAttempt{At: now.Add(time.Duration(i) * time.Millisecond), WebhookID: fmt.Sprint("m-", i), Status: 200})
	}
	require.NoError(t, b.store.AppendWebhookAttempts(b.ctx, id, many))
	got, err = b.store.WebhookAttempts(b.ctx, id)
	require.NoError(t, err)
	require.Len(t, got, leasestore.MaxWebhookAttempts)
	require.Equal(t, fmt.Sprint("m-", leasestore.MaxWebhookAttempts+4), got[0].WebhookID)
	require.Equal(t, "m-5", got[len(got)-1].WebhookID, "the oldest went first")

	require.NoError(t, b.store.DeleteWebhook(b.ctx, id))
	got, err = b.store.WebhookAttempts(b.ctx, id)
	require.NoError(t, err)
	require.Empty(t, got, "the log goes with the webhook")
}
