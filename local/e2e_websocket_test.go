package local_test

import (
	"strings"
	"testing"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/wsbridge"
	"github.com/heraldevents/herald/functions/wsframe/wstest"
	"github.com/heraldevents/herald/local"
)

// TestWebSocketConformance runs the WebSocket frame protocol's suite
// against the local adapter's gorilla bridge, end to end over TCP.
func TestWebSocketConformance(t *testing.T) {
	t.Parallel()
	const limited, other, reader = "limited-token-of-some-length", "other-token-of-some-length", "reader-token-of-some-length"
	h := local.Start(t, local.Option(func(c *local.Config) {
		c.DeliveryLimit = 2
		c.Tokens = auth.StaticTokens{
			limited: {ID: "publisher", Permissions: []string{"publish:*"}},
			other:   {ID: "other", Permissions: []string{"receive:*"}},
			reader:  {ID: "reader", Permissions: wstest.ReaderPermissions},
		}
	}))
	wstest.Run(t, wstest.Harness{
		Dial:          wstest.Dialer("ws" + strings.TrimPrefix(h.URL, "http") + wsbridge.Path),
		RESTURL:       h.URL,
		Token:         h.Token,
		LimitedToken:  limited,
		OtherToken:    other,
		ReaderToken:   reader,
		DeliveryLimit: 2,
		Push:          true,
	})
}
