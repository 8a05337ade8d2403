package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

var webhookCases = []conformanceCase{
	{"Webhook/CreateGetUpdateDelete", testWebhookLifecycle},
	{"Webhook/ConcurrentUpdates", testWebhookConcurrent},
	{"Webhook/List", testWebhookList},
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

	up, err := b.store.UpdateWebhook(b.ctx, id, func(w *leasestore.Webhook) error {
		w.Secrets = w.Secrets[:1]
		w.Disabled = "410"
		return nil
	})
	require.NoError(t, err)
	require.Len(t, up.Secrets, 1)
	got, err = b.store.GetWebhook(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, "410", got.Disabled)
	require.Len(t, got.Secrets, 1)

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
