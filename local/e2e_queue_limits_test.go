package local_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/internal/emulators"
	"github.com/heraldevents/herald/local"
)

// TestQueueMessageTTLE2E: with HERALD_QUEUE_MESSAGE_TTL set, an event a
// durable queue held past the TTL is dead-lettered with reason EXPIRED
// instead of delivered.
func TestQueueMessageTTLE2E(t *testing.T) {
	t.Parallel()
	c := start(t, streamOpts(func(c *local.Config) {
		c.QueueMessageTTL = time.Millisecond
	}))
	status, _ := c.createQueue(t, "ttl-q", nil)
	require.Equal(t, http.StatusCreated, status)
	c.publish(t, ev("orders.created", "/orders/1", map[string]any{"n": 1}))
	time.Sleep(20 * time.Millisecond) // let the event age past the 1 ms TTL

	s := c.mustStream(t, durablePath("ttl-q"), nil)
	s.connected(t)
	defer s.close()
	deadline := time.Now().Add(frameWait)
	for {
		p := c.listDeadLetters(t, url.Values{"limit": {"10"}})
		if len(p.DeadLetters) > 0 {
			require.Len(t, p.DeadLetters, 1)
			require.Equal(t, "EXPIRED", p.DeadLetters[0].Reason)
			require.Equal(t, "ttl-q", p.DeadLetters[0].OriginQueue)
			require.JSONEq(t, `{"n":1}`, string(p.DeadLetters[0].Event.Message))
			return
		}
		require.True(t, time.Now().Before(deadline), "the expired event was not dead-lettered")
		time.Sleep(10 * time.Millisecond)
	}
}

// maxLenBrokers are the brokers the max-length case runs on: every one
// that keeps publish order, so "the oldest" is well defined. Each returns
// the topic URL of a topic of the test's own, removed when it ends.
var maxLenBrokers = []struct {
	name  string
	topic func(t *testing.T) string
}{
	{"mem", func(*testing.T) string { return "" }},
	{"rabbit", func(t *testing.T) string {
		server := emulators.RabbitMQ(t)
		exchange := "herald-maxlen-" + uuid.NewString()[:8]
		t.Cleanup(func() {
			c, err := amqp.Dial(server)
			if err != nil {
				return
			}
			defer c.Close()
			if ch, err := c.Channel(); err == nil {
				_ = ch.ExchangeDelete(exchange, false, false)
			}
		})
		return "rabbit://" + exchange + "?url=" + url.QueryEscape(server)
	}},
	{"nats", func(t *testing.T) string {
		server := emulators.NATS(t)
		stream := "HERALD_MAXLEN_" + strings.ToUpper(uuid.NewString()[:8])
		t.Cleanup(func() {
			nc, err := nats.Connect(server)
			if err != nil {
				return
			}
			defer nc.Close()
			if js, err := jetstream.New(nc); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = js.DeleteStream(ctx, stream)
			}
		})
		return server + "/" + stream
	}},
}

// TestQueueMaxLengthCountsBacklogE2E: a durable queue of maximum length 5
// that no consumer reads takes 8 events. The notifications API says a
// queue that reaches its maximum length evicts its oldest messages to the
// dead-letter queue: a consumer that comes later gets the newest 5, in
// order, and the 3 oldest are dead letters with reason MAXLEN, never
// delivered. Whether the reap-idle-queues job took the backlog in first
// ("job") or the stream's own attach did ("attach"), on every broker that
// keeps publish order.
func TestQueueMaxLengthCountsBacklogE2E(t *testing.T) {
	t.Parallel()
	for _, br := range maxLenBrokers {
		for _, viaJob := range []bool{true, false} {
			name := br.name + "/attach"
			if viaJob {
				name = br.name + "/job"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				topic := br.topic(t)
				c := start(t, streamOpts(func(c *local.Config) {
					if topic != "" {
						c.TopicURL = topic
					}
					c.QueueMaxLength = 5
					c.ReapInterval = config.MaxReapInterval // the test runs the job itself
				}))
				status, _ := c.createQueue(t, "maxlen-q", nil)
				require.Equal(t, http.StatusCreated, status)
				for n := 1; n <= 8; n++ {
					// One at a time: each publish returns before the next,
					// so the broker holds them in this order.
					res := c.publish(t, ev("orders.created", "/orders/1", map[string]any{"n": n}))
					require.True(t, res[0].Success, "publish %d: %+v", n, res[0])
				}
				if viaJob {
					out := c.runJob(t, "reap-idle-queues")
					require.EqualValues(t, 8, out["taken_in"], "%v", out)
					require.EqualValues(t, 3, out["maxlen_dead_letters"], "%v", out)
					require.EqualValues(t, 0, out["failed"], "%v", out)
				}

				s := c.mustStream(t, durablePath("maxlen-q"), nil)
				s.connected(t)
				defer s.close()
				require.Equal(t, []int{4, 5, 6, 7, 8}, nValues(t, s.events(t, 5)), "the newest 5, oldest first")

				p := c.listDeadLetters(t, url.Values{"limit": {"10"}})
				require.Len(t, p.DeadLetters, 3)
				var dead []int
				for _, d := range p.DeadLetters {
					require.Equal(t, "MAXLEN", d.Reason)
					require.Equal(t, "maxlen-q", d.OriginQueue)
					require.Zero(t, d.DeliveryCount, "evicted before any delivery")
					dead = append(dead, nValues(t, []consumerEvent{d.Event})...)
				}
				require.ElementsMatch(t, []int{1, 2, 3}, dead)
			})
		}
	}
}
