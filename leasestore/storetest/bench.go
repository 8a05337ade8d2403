package storetest

import (
	"bytes"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/heraldevents/herald/leasestore"
)

// benchBatch and benchEventBytes shape the benchmarks: pulls of 100 events
// of 1 KiB each, the largest batch the durable-consumer API allows.
const (
	benchBatch      = 100
	benchEventBytes = 1024
)

// RunBenchmarks measures the store on the harness that newHarness makes:
//
//   - PullAck: one worker pulls 100 events of 1 KiB and acknowledges them,
//     over and over; reports events/s.
//   - PullAckParallel: GOMAXPROCS-many workers (b.SetParallelism scales
//     it) on two store clients do the same at once; reports events/s and
//     lost-race retries show up as lower throughput.
func RunBenchmarks(b *testing.B, newHarness HarnessMaker) {
	h, err := newHarness(b.Context(), b)
	if err != nil {
		b.Fatalf("make harness: %v", err)
	}
	b.Run("PullAck", func(b *testing.B) { benchPullAck(b, h) })
	b.Run("PullAckParallel", func(b *testing.B) { benchPullAckParallel(b, h) })
}

// benchBody is the 1 KiB event every benchmark pulls; the source holds the
// same slice many times, so memory stays flat however long a run is.
var benchBody = bytes.Repeat([]byte{'e'}, benchEventBytes)

func benchBodies() [][]byte {
	out := make([][]byte, benchBatch)
	for i := range out {
		out[i] = benchBody
	}
	return out
}

func benchPullAck(b *testing.B, h Harness) {
	bd := setup(b, h, setupOptions{})
	src := NewScriptedSource()
	batch := benchBodies()
	var events int64
	b.ReportAllocs()
	for b.Loop() {
		src.Add(batch...)
		l, err := bd.tryPull(bd.store, "bench", benchBatch, src)
		if err != nil || l == nil || len(l.Events) != benchBatch {
			b.Fatalf("pull: lease %v, err %v", l, err)
		}
		r, err := bd.store.Acknowledge(bd.ctx, leasestore.AckParams{
			Consumer: bd.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK,
		})
		if err != nil || r.Outcome != leasestore.OutcomeCommitted {
			b.Fatalf("acknowledge: %v, %v", r, err)
		}
		events += int64(len(l.Events))
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

func benchPullAckParallel(b *testing.B, h Harness) {
	bd := setup(b, h, setupOptions{clients: 2})
	src := NewScriptedSource()
	var events, workers atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := workers.Add(1)
		store := bd.stores[w%int64(len(bd.stores))]
		worker := "bench-" + strconv.FormatInt(w, 10)
		batch := benchBodies()
		for pb.Next() {
			src.Add(batch...)
			l, err := bd.tryPull(store, worker, benchBatch, src)
			if err != nil {
				b.Errorf("pull: %v", err)
				return
			}
			if l == nil {
				continue // others took this round's events
			}
			_, err = store.Acknowledge(bd.ctx, leasestore.AckParams{
				Consumer: bd.consumer, LeaseID: l.ID, Generation: l.Generation, Status: leasestore.StatusOK,
			})
			if err != nil {
				b.Errorf("acknowledge: %v", err)
				return
			}
			events.Add(int64(len(l.Events)))
		}
	})
	b.ReportMetric(float64(events.Load())/b.Elapsed().Seconds(), "events/s")
}
