//go:build herald_aws && herald_gcp

package cloudbuild

// Setting both tags is a mistake; this makes the compiler name it.
var _ = herald_aws_and_herald_gcp_are_exclusive_set_one_tag
