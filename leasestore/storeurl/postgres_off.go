//go:build herald_aws

package storeurl

// This build (herald_aws) leaves PostgreSQL out: Open refuses postgres://
// and postgresql:// URLs, and pgx is not linked.

var openPostgres openFunc
