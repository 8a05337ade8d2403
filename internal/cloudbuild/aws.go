//go:build herald_aws

package cloudbuild

// Current is the build this binary is.
const Current = AWS
