package main_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/internal/safedial"
	"github.com/heraldevents/herald/local"
)

// TestWebhooks: herald webhooks create prints the secret once, and the
// receiver verifies the delivery with it; get, update (a refused url is
// an error that changes nothing), pause, resume, rotate-secret and
// attempts work, in a table and as JSON; usage errors exit 2.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	type delivery struct {
		header http.Header
		body   []byte
	}
	got := make(chan delivery, 8)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), body}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(recv.Close)
	allow, err := safedial.ParseAllowList("127.0.0.1/32")
	require.NoError(t, err)
	h := local.Start(t, func(c *local.Config) { c.WebhookAllow = allow })
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()

	type created struct {
		client.Destination
		Secret string `json:"secret"`
	}
	c := jsonOf[created](t, herald(t, h, "webhooks", "create", "--url", recv.URL+"/in", "--type", "orders.created", "--rate-limit", "20", "-o", "json"))
	require.NotEmpty(t, c.ID)
	require.True(t, strings.HasPrefix(c.Secret, "whsec_"), c.Secret)
	require.NotNil(t, c.Webhook)
	assert.Equal(t, recv.URL+"/in", c.Webhook.URL)
	assert.Equal(t, 20.0, c.Webhook.RateLimit)

	r := herald(t, h, "publish", "--type", "orders.created", "--resource", "/orders/1", "--data", `{"n":1}`)
	require.Equal(t, 0, r.code, r.stderr)
	var d delivery
	select {
	case d = <-got:
	case <-ctx.Done():
		t.Fatal("no delivery came")
	}
	wh, err := standardwebhooks.NewWebhook(c.Secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(d.body, d.header), "the printed secret verifies the delivery")

	r = herald(t, h, "webhooks", "get", c.ID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, recv.URL+"/in")
	assert.Contains(t, r.stdout, "20/s")
	assert.NotContains(t, r.stdout, "whsec_", "get never shows the secret")

	r = herald(t, h, "webhooks", "update", c.ID, "--ordered", "--no-rate-limit", "--max-batch", "5", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	u := jsonOf[client.Destination](t, r)
	assert.True(t, u.Webhook.Ordered)
	assert.Zero(t, u.Webhook.RateLimit)
	assert.Equal(t, 5, u.Webhook.MaxBatch)
	r = herald(t, h, "webhooks", "update", c.ID, "--url", "https://169.254.169.254/", "--ordered=false")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "url")
	u = jsonOf[client.Destination](t, herald(t, h, "webhooks", "get", c.ID, "-o", "json"))
	assert.True(t, u.Webhook.Ordered, "a refused update changes nothing")

	r = herald(t, h, "webhooks", "pause", c.ID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "true")
	require.Equal(t, 0, herald(t, h, "webhooks", "resume", c.ID).code)

	r = herald(t, h, "webhooks", "rotate-secret", c.ID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "new signing secret (shown this once): whsec_")
	assert.NotContains(t, r.stdout, c.Secret)

	// The attempt log shows the delivery once its push run moved on.
	var as []client.WebhookAttempt
	for len(as) == 0 {
		as = jsonOf[[]client.WebhookAttempt](t, herald(t, h, "webhooks", "attempts", c.ID, "-o", "json"))
		if len(as) == 0 {
			select {
			case <-ctx.Done():
				t.Fatal("the attempt log stayed empty")
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	assert.Equal(t, http.StatusAccepted, as[0].Status)
	assert.Equal(t, d.header.Get("webhook-id"), as[0].WebhookID)
	r = herald(t, h, "webhooks", "attempts", c.ID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "202")

	assert.Equal(t, 2, herald(t, h, "webhooks", "create", "--type", "a.b").code, "create needs --url")
	assert.Equal(t, 2, herald(t, h, "webhooks", "update", c.ID).code, "update needs a flag")
	assert.Equal(t, 2, herald(t, h, "webhooks", "update", c.ID, "--rate-limit", "1", "--no-rate-limit").code)
	assert.Equal(t, 3, herald(t, h, "webhooks", "get", "no-such-webhook").code)
	for _, args := range [][]string{{"webhooks"}, {"webhooks", "create"}, {"webhooks", "update"}, {"webhooks", "rotate-secret"}, {"webhooks", "attempts"}} {
		r := herald(t, nil, append(args, "--help")...)
		assert.Equal(t, 0, r.code, "%v --help", args)
		assert.Contains(t, r.stdout, "herald "+strings.Join(args, " "))
	}
}
