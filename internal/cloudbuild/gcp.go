//go:build herald_gcp

package cloudbuild

// Current is the build this binary is.
const Current = GCP
