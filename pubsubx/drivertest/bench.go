package drivertest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// benchBatch is how many events a benchmark round sends before receiving
// them back with Receive(max=100) and acking: the publish batch limit and
// the pull limit of the durable-consumer API.
const benchBatch = 100

// RunBenchmarks measures a driver's throughput in events per second (the
// "events/s" metric) for Herald's hot path: send a batch of events, then
// receive them up to 100 at a time and ack each batch. It runs two
// variants: "Sequential" sends one event after another; "Parallel" sends
// 16 at a time (Send, one message per call, 16 calls overlapping).
// Bodies are about 300 bytes, a typical small CloudEvent.
func RunBenchmarks(b *testing.B, newHarness HarnessMaker) {
	h, err := newHarness(b.Context(), b)
	require.NoError(b, err, "making the harness")
	for _, v := range []struct {
		name    string
		workers int
	}{{"Sequential", 1}, {"Parallel", 16}} {
		b.Run(v.name, func(b *testing.B) { benchSendReceiveAck(b, h, v.workers) })
	}
}

func benchSendReceiveAck(b *testing.B, h Harness, workers int) {
	f := newFixture(b, h)
	br := f.broker()
	sub := f.subscribe(br, "bench", nil)

	b.ResetTimer()
	for start := 0; start < b.N; start += benchBatch {
		// Encoding is the publish handler's cost, not the broker's.
		b.StopTimer()
		batch := f.messages(min(benchBatch, b.N-start), "herald.bench", "/bench/1")
		b.StartTimer()
		if workers == 1 {
			f.send(br, batch...)
		} else {
			f.sendParallel(br, batch, workers)
		}
		got := f.receiveUntil(br, sub, benchBatch, hasAll(batch))
		f.ack(br, sub, got)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
