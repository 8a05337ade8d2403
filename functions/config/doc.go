// Package config is the one source of truth for Herald's environment
// variables: the table (Vars) that docs/configuration.md, the SAM template
// and the Terraform module are checked against, and the parser (Load) that
// the local adapter, the Lambda bootstrap and the Cloud Run server all
// use. It imports nothing of Herald's above it (package router, httpx and
// the transports import it), so the parser links no cloud runtime.
//
// # Table
//
// Each variable is one row (Var): its name, defaults per profile, unit,
// range, the functions that read it and the Config field it lands in.
// Load iterates the rows: a row with a field parses its value into that
// field and checks its range, so adding a knob is adding a row and a
// field. Defaults that another package also applies (package delivery's
// stream lifetimes, package leasestore's delivery limit) are that
// package's exported constants, referenced here.
//
// # Profiles
//
// Three profiles read the table. Local (the local adapter) has defaults for
// everything, including an all-powerful development token. Lambda and
// CloudRun have no default broker, store or token: a function that needs
// one refuses to start without it, with a message naming the variable.
//
// # Config values
//
// A Config holds values, never markers: 0 is 0 (HERALD_SSE_ACK_DELAY=0s
// acknowledges at once; HERALD_HTTP2_PING_INTERVAL=0s sends no PINGs;
// HERALD_MAX_INFLIGHT_BYTES=0 removes the bound). A Config built in code
// starts from Defaults(profile) and changes fields; Validate names the
// field and the variable of any value that means nothing (negative, or 0
// where 0 is not a value), and app.Open calls it.
//
// # Tokens
//
// HERALD_TOKENS holds a JSON object from bearer token to principal, and
// HERALD_TOKENS_FILE names a file holding the same:
//
//	{"s3cr3t-token-of-32-characters…": {"id": "billing", "permissions": ["publish:billing.*", "read:events", "receive:billing.*"]}}
//
// Permission names are those of package auth: read:events,
// manage:destinations, run:jobs, publish:PATTERN, receive:PATTERN,
// consume-durable-queues, create-durable-queues, delete-durable-queues,
// inspect-and-replay-all-dlq (the last four also with the notifications API's
// "event-consumer-service:" prefix) and *. An unknown name is refused.
//
// Both may be set, together with HERALD_DEV_TOKEN (a token with every
// permission); a token given twice is refused. Errors and logs name a token
// by its principal id, never by its value.
package config
