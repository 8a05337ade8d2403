//go:build !herald_aws && !herald_gcp

// Package firestore runs leasestore's conformance suite (storetest) and
// benchmarks on Google's Firestore emulator (through storeurltest). It
// holds tests only: each backend's suite is a package of its own so that
// go test runs the three backends side by side and none of them alone
// holds up the test phase (leasestore/storeurl keeps the focused backend
// cases).
package firestore
