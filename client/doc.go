// Package client is the Go client of Herald: publish events, run pull
// workers on durable consumers, stream durable and non-durable queues over
// gRPC, and manage consumers, durable queues and dead letters.
//
// It speaks the two APIs Herald implements: the durable-consumer pull API
// (compatible with Occtoo's: /v1/event-destinations/{id}/pull and
// /acknowledge) and the notifications API (compatible with NVIDIA
// Omniverse's: publishing, durable queues, streams, dead letters). It
// imports none of Herald's server packages, only the generated gRPC code in
// gen/.
//
// # Connecting
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithToken("dev-token"))
//
// A token source (golang.org/x/oauth2's TokenSource) replaces the static
// token where tokens expire: WithTokenSource asks it for a token on every
// request and every stream (re)connect, so a refreshed JWT is used as soon
// as the source hands it out.
//
// # Retries
//
// Every REST call is retried, with exponential backoff and full jitter, on
// a connection error, 429 (waiting at least its Retry-After), 502, 503 and
// 504 — the answers that retrying can fix — and never on any other 4xx. A
// call gives up after RetryPolicy.MaxAttempts attempts or when its context
// ends, and returns the last error. Retried publishes can duplicate an event
// whose first attempt reached Herald but whose answer was lost: Herald
// delivers at least once, so consumers must be idempotent anyway. Pull is
// the exception for 429: a full in-flight window is an answer for the
// worker loop (Consume waits for the Retry-After itself).
//
// # Consuming
//
// Consume runs pull workers on a durable consumer: each worker leases a
// batch, runs the handler, and acknowledges the batch "ok" when the handler
// returns nil and "failed" (redelivered, with a higher attempt) when it
// returns an error. While the handler runs, Consume extends the lease
// (Extend) at half the visibility, up to ConsumeOptions.MaxExtension
// (default 1 h); the handler's context ends with the lease's extended life
// (ErrLeaseExpired) or when an extension answers stale (ErrLeaseLost). A
// *Rejection error says how the batch failed: RetryAfter delays its
// redelivery (acknowledged failed with retryAfter) and DeadLetter sends it
// to the dead-letter queue at once (acknowledged rejected). The same
// delivery controls are there call by call (Extend, AcknowledgeWith), and
// a consumer's retry and dead-letter policies are set by
// CreateConsumerWith and UpdateConsumer. Stream does the same on a durable queue over the gRPC
// stream ConsumeDurableEventsWithAcks, acknowledging or nacking event by
// event, and StreamNonDurable follows a non-durable queue, reconnecting with
// its reconnect token. All three back off when there is nothing to do,
// reconnect or retry through outages, and stop gracefully when their
// context is cancelled: what is in hand is finished and settled, nothing
// new is taken.
//
// # Errors
//
// A REST error is an *Error with the HTTP status and Herald's error code;
// IsNotFound and StatusCode inspect it, and gRPC stream errors
// (connectrpc.com/connect's *connect.Error) answer them too.
package client
