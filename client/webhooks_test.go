package client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/internal/safedial"
	"github.com/heraldevents/herald/local"
)

// delivered is one request a test receiver got.
type delivered struct {
	header http.Header
	body   []byte
}

// TestWebhookLifecycle: through the client, against a Herald that pushes
// in-process, a webhook is created (its secret returned once), its
// deliveries verify with the Standard Webhooks library under that secret,
// it is read, patched (a refused URL is a 422 that changes nothing),
// paused and resumed, its secret rotated (the next delivery verifies with
// the new secret), and its attempts listed.
func TestWebhookLifecycle(t *testing.T) {
	t.Parallel()
	got := make(chan delivered, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- delivered{header: r.Header.Clone(), body: body}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(recv.Close)
	allow, err := safedial.ParseAllowList("127.0.0.1/32")
	require.NoError(t, err)
	b := setup(t, func(c *local.Config) { c.WebhookAllow = allow })
	ctx := testContext(t)
	next := func() delivered {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-ctx.Done():
			t.Fatal("no delivery came")
			return delivered{}
		}
	}
	verifies := func(d delivered, secret string) bool {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		return wh.Verify(d.body, d.header) == nil
	}

	d, secret, err := b.c.CreateWebhook(ctx, client.WebhookOptions{URL: recv.URL + "/hook", Timeout: 5 * time.Second, RateLimit: 50})
	require.NoError(t, err)
	require.Equal(t, client.Webhook, d.Type)
	require.Regexp(t, `^whsec_`, secret)
	require.Equal(t, &client.WebhookConfig{URL: recv.URL + "/hook", TimeoutSeconds: 5, MaxBatch: 1, RateLimit: 50}, d.Webhook)

	b.publish(t, "orders.created", "o-1", map[string]int{"n": 1})
	first := next()
	require.True(t, verifies(first, secret), "the delivery verifies under the secret")

	g, err := b.c.GetConsumer(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, recv.URL+"/hook", g.Webhook.URL)

	ordered, batch := true, 10
	u, err := b.c.UpdateWebhook(ctx, d.ID, client.WebhookUpdate{Ordered: &ordered, MaxBatch: &batch, RemoveRateLimit: true,
		Policies: client.PolicyUpdate{DeadLetterPolicy: &client.DeadLetterPolicy{MaxDeliveryAttempts: 4}}})
	require.NoError(t, err)
	require.True(t, u.Webhook.Ordered)
	require.Equal(t, 10, u.Webhook.MaxBatch)
	require.Zero(t, u.Webhook.RateLimit)
	require.Equal(t, 4, u.DeadLetterPolicy.MaxDeliveryAttempts)
	bad := "https://169.254.169.254/latest"
	_, err = b.c.UpdateWebhook(ctx, d.ID, client.WebhookUpdate{URL: &bad, Ordered: new(false)})
	require.Equal(t, http.StatusUnprocessableEntity, client.StatusCode(err), "%v", err)
	g, err = b.c.GetConsumer(ctx, d.ID)
	require.NoError(t, err)
	require.True(t, g.Webhook.Ordered, "a refused update changes nothing")

	p, err := b.c.PauseConsumer(ctx, d.ID)
	require.NoError(t, err)
	require.True(t, p.Paused)
	p, err = b.c.ResumeConsumer(ctx, d.ID)
	require.NoError(t, err)
	require.False(t, p.Paused)

	fresh, err := b.c.RotateWebhookSecret(ctx, d.ID)
	require.NoError(t, err)
	require.NotEqual(t, secret, fresh)
	b.publish(t, "orders.created", "o-2", map[string]int{"n": 2})
	second := next()
	require.True(t, verifies(second, fresh), "the new secret signs")
	require.True(t, verifies(second, secret), "the old one too, during the overlap")

	// The attempt log is written when a push run leaves the destination:
	// wait for both attempts to show.
	var as []client.WebhookAttempt
	for len(as) < 2 {
		as, err = b.c.WebhookAttempts(ctx, d.ID)
		require.NoError(t, err)
		if len(as) < 2 {
			select {
			case <-ctx.Done():
				t.Fatalf("the attempt log holds %d attempts", len(as))
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	require.Len(t, as, 2)
	require.Equal(t, http.StatusNoContent, as[0].Status)
	require.Equal(t, second.header.Get("webhook-id"), as[0].WebhookID, "newest first")
	require.Equal(t, first.header.Get("webhook-id"), as[1].WebhookID)

	_, err = b.c.WebhookAttempts(ctx, "no-such-destination")
	require.True(t, client.IsNotFound(err), "%v", err)
}
