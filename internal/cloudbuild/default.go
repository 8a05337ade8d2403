//go:build !herald_aws && !herald_gcp

package cloudbuild

// Current is the build this binary is.
const Current = Default
