package storetest

import "testing"

// RunBenchmarks measures the store on the harness that newHarness makes.
func RunBenchmarks(b *testing.B, newHarness HarnessMaker) {
	h, err := newHarness(b.Context(), b)
	if err != nil {
		b.Fatalf("make harness: %v", err)
	}
	_ = h
}
