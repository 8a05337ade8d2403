package nats_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
)

// ackSeq is the stream sequence in a $JS.ACK subject (either form).
func ackSeq(t *testing.T, subject string) uint64 {
	toks := strings.Split(subject, ".")
	i := 5
	if len(toks) >= 12 {
		i = 7
	}
	n, err := strconv.ParseUint(toks[i], 10, 64)
	require.NoError(t, err, "ack subject %q", subject)
	return n
}

// watchAcks subscribes a second connection to the stream's ack subjects:
// the server routes every ack to it as well as to the consumer.
func (f *fixture) watchAcks() (*natsgo.Conn, chan *natsgo.Msg) {
	nc, err := natsgo.Connect(f.server)
	require.NoError(f.t, err)
	f.t.Cleanup(nc.Close)
	ch := make(chan *natsgo.Msg, 1024)
	_, err = nc.ChanSubscribe("$JS.ACK."+f.stream+".>", ch)
	require.NoError(f.t, err)
	require.NoError(f.t, nc.Flush())
	return nc, ch
}

// seen is every ack the watcher got: a flush of its connection returns
// after everything the server routed to it before.
func seen(t *testing.T, nc *natsgo.Conn, ch chan *natsgo.Msg) []*natsgo.Msg {
	require.NoError(t, nc.Flush())
	var out []*natsgo.Msg
	for {
		select {
		case m := <-ch:
			out = append(out, m)
		default:
			return out
		}
	}
}

// TestSettleIsOneRoundTrip: Ack and Nack send one "+ACK" or "-NAK" per
// message, in stream order whatever the order given, and only the last
// asks for a reply; when Ack returns the server has applied every ack (the
// consumer has nothing pending and its ack floor is the last message).
func TestSettleIsOneRoundTrip(t *testing.T) {
	f := setup(t, "")
	sub := f.subscribe(nil)
	f.send("t", "/x", "1", "2", "3", "4", "5", "6", "7", "8")
	got, err := f.b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 8, Wait: time.Second})
	require.NoError(t, err)
	require.Len(t, got, 8)
	nc, acks := f.watchAcks()

	check := func(payload string, n int) []uint64 {
		t.Helper()
		msgs := seen(t, nc, acks)
		require.Len(t, msgs, n, "one %s per message", payload)
		var seqs []uint64
		for i, m := range msgs {
			require.Equal(t, payload, string(m.Data))
			if i < n-1 {
				require.Empty(t, m.Reply, "%s %d of %d asks for a reply", payload, i+1, n)
			} else {
				require.NotEmpty(t, m.Reply, "the last %s asks for no reply", payload)
			}
			seqs = append(seqs, ackSeq(t, m.Subject))
		}
		require.IsIncreasing(t, seqs, "%ss in stream order", payload)
		return seqs
	}

	// Nack three, newest first: they go out oldest first.
	require.NoError(t, f.b.Nack(f.ctx, sub, []*pubsubx.Message{got[7], got[3], got[5]}))
	check("-NAK", 3)
	// Ack the other five, shuffled.
	require.NoError(t, f.b.Ack(f.ctx, sub, []*pubsubx.Message{got[4], got[0], got[6], got[2], got[1]}))
	check("+ACK", 5)
	// The nacked three come back in order; acking them leaves nothing.
	again, err := f.b.Receive(f.ctx, sub, pubsubx.ReceiveParams{Max: 8, Wait: time.Second})
	require.NoError(t, err)
	require.Equal(t, []string{"4", "6", "8"}, bodies(again))
	require.NoError(t, f.b.Ack(f.ctx, sub, again))
	seqs := check("+ACK", 3)

	js, err := jetstream.New(nc)
	require.NoError(t, err)
	c, err := js.Consumer(f.ctx, f.stream, sub)
	require.NoError(t, err)
	info := c.CachedInfo()
	require.Zero(t, info.NumAckPending, "acks not applied when Ack returned")
	require.Equal(t, seqs[len(seqs)-1], info.AckFloor.Stream, "ack floor")
}
