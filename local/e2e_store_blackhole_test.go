package local_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/router"
	consumerpb "github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta"
	"github.com/heraldevents/herald/gen/nvidia/omniverse/notifications/consumer/v1beta/consumerv1betaconnect"
	"github.com/heraldevents/herald/internal/blackhole"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/leasestore/storeurl"
	"github.com/heraldevents/herald/leasestore/storeurl/storeurltest"
	"github.com/heraldevents/herald/local"
)

// TestBlackHoledStoreAnswers: with the lease store behind an address that
// accepts TCP and never answers (a wedged server, a firewall dropping
// replies), every REST call that needs the store answers a clean 5xx,
// and a unary gRPC call DEADLINE_EXCEEDED or UNAVAILABLE, within the
// request bound (router.RequestTimeout), rather than holding
// the request as long as the client waits (DynamoDB did: for ever);
// readiness names the store; and once the store answers again, the event
// published before the outage is delivered. The store is reached through
// a proxy (internal/blackhole) that forwards to the real server until the
// test cuts it.
func TestBlackHoledStoreAnswers(t *testing.T) {
	stores := map[string]func(t *testing.T, hole *blackhole.Listener) (storeURL, server string){
		"postgres": func(t *testing.T, hole *blackhole.Listener) (string, string) {
			db := emulators.PostgreSQL(t)
			return strings.Replace(db, emulators.PostgreSQLAddr, hole.Addr(), 1) + "?table=herald", emulators.PostgreSQLAddr
		},
		"dynamodb": func(t *testing.T, hole *blackhole.Listener) (string, string) {
			moto := emulators.Moto(t)
			storeurltest.IsolateAWS(t)
			table := storeurltest.UniqueName("herald-blackhole")
			require.NoError(t, storeurl.CreateTable(t.Context(), (&storeurltest.DynamoDB{Endpoint: moto}).Client(), table))
			u, err := url.Parse(moto)
			require.NoError(t, err)
			return (&storeurltest.DynamoDB{Endpoint: "http://" + hole.Addr()}).StoreURL(table), u.Host
		},
	}
	bound := router.RequestTimeout(0, delivery.DefaultPublishTimeout)
	for _, name := range []string{"postgres", "dynamodb"} {
		t.Run(name, func(t *testing.T) {
			hole := blackhole.Start(t)
			storeURL, server := stores[name](t, hole)
			hole.Forward(server)
			h := local.Start(t, func(c *local.Config) { c.StoreURL = storeURL; c.ReapInterval = config.MaxReapInterval })
			c := &client{base: h.URL, token: h.Token, hc: &http.Client{Timeout: 3 * bound}}
			id := c.create(t, nil)
			c.publish(t, ev("app.blackhole", "/r", map[string]int{"i": 1}))

			hole.Forward("") // new connections go nowhere
			hole.Drop()      // and open ones are cut, so the store must dial again
			calls := []struct{ method, path, body string }{
				{"POST", pullPath(id, nil), ""},
				{"GET", "/v1/event-destinations/" + id, ""},
				{"GET", "/v1/event-destinations", ""},
				{"POST", "/v1/event-destinations/" + id + "/acknowledge", `{"leaseId":"x","generation":0,"status":"ok"}`},
			}
			var wg sync.WaitGroup
			for _, call := range calls {
				wg.Go(func() {
					var body []byte
					if call.body != "" {
						body = []byte(call.body)
					}
					began := time.Now()
					r, err := c.raw(call.method, call.path, c.token, body)
					took := time.Since(began)
					if !assertNoError(t, err, "%s %s", call.method, call.path) {
						return
					}
					if r.Status != http.StatusServiceUnavailable && r.Status != http.StatusGatewayTimeout {
						t.Errorf("%s %s with the store black-holed: %d %s, want 503 or 504", call.method, call.path, r.Status, r.Body)
					}
					var e errorBody
					if json.Unmarshal(r.Body, &e) != nil || e.Code == "" {
						t.Errorf("%s %s: not an error body: %s", call.method, call.path, r.Body)
					}
					if took > bound+5*time.Second {
						t.Errorf("%s %s answered after %v; the bound is %v", call.method, call.path, took, bound)
					}
					t.Logf("%s %s: %d %s after %v", call.method, call.path, r.Status, e.Code, took.Round(time.Millisecond))
				})
			}
			wg.Go(func() { // a unary gRPC call that needs the store
				cons := consumerv1betaconnect.NewEventConsumerServiceClient(h2cClient(t), h.URL, connect.WithGRPC())
				began := time.Now()
				_, err := cons.CreateDurableQueue(t.Context(), rpc(&consumerpb.CreateDurableQueueRequest{QueueId: "blackhole-q"}, h.Token))
				took := time.Since(began)
				if code := connect.CodeOf(err); code != connect.CodeDeadlineExceeded && code != connect.CodeUnavailable {
					t.Errorf("CreateDurableQueue with the store black-holed: %v, want DEADLINE_EXCEEDED or UNAVAILABLE", err)
				}
				if took > bound+5*time.Second {
					t.Errorf("CreateDurableQueue answered after %v; the bound is %v", took, bound)
				}
				t.Logf("CreateDurableQueue: %v after %v", connect.CodeOf(err), took.Round(time.Millisecond))
			})
			wg.Wait()
			r, err := c.raw("GET", "/health/ready", "", nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
			require.Contains(t, string(r.Body), `"store":"unavailable"`)

			hole.Forward(server) // the store comes back
			hole.Drop()
			require.Eventually(t, func() bool {
				r, err := c.raw("POST", pullPath(id, nil), c.token, nil)
				return err == nil && r.Status == http.StatusOK && strings.Contains(string(r.Body), "app.blackhole")
			}, 3*bound, 200*time.Millisecond, "the event published before the outage is delivered once the store answers")
		})
	}
}

// assertNoError reports err as a test error from any goroutine.
func assertNoError(t *testing.T, err error, format string, args ...any) bool {
	if err != nil {
		t.Errorf(format+": %v", append(args, err)...)
		return false
	}
	return true
}
