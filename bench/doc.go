// Package bench holds Herald's end-to-end benchmarks: the whole publish,
// pull and acknowledge path over loopback HTTP against local.Start, the way
// a client sees it. It has no code of its own; run it with `make bench`.
// docs/benchmarks.md records the figures and how to reproduce them.
package bench
