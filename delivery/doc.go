// Package delivery is Herald's core: every transport — REST and SSE, gRPC
// (Connect), the WebSocket bridges, the Lambda and Cloud Run entrypoints —
// is a thin face on a *Service, which publishes events to the broker
// (package pubsubx) and runs consumers over the lease store (package
// leasestore). It implements the rules of the durable-consumer API
// (compatible with Occtoo's) and of the notifications API (compatible with
// NVIDIA Omniverse's); the transports only convert shapes and errors.
//
// # Model
//
// A Service holds no per-consumer state in memory: any number of
// Services sharing a broker and a store behave as one, and every change
// of a consumer is a revision-conditional write in the store. Every
// method takes the caller's *auth.Principal and checks its permissions
// and event-type rights first.
//
// Publish and PublishBatch authorize the event type for the principal,
// validate (Event.Validate), stamp id, published_at and the principal,
// and send to the topic; each event has its own result, and a broker that
// fails or does not answer within Config.PublishTimeout is a per-event
// herr.Unavailable, never a lost event reported as sent. Events too big
// for the broker travel by claim check (claims.go).
//
// Every consumer owns a broker subscription made at the head of the
// stream, with its filters pushed down where the broker can and always
// re-checked here. Durable consumers (the durable-consumer API's event
// destinations) take leased batches: Pull, Acknowledge. Durable and
// non-durable queues (the notifications API) are read by streams.
//
// # Streams
//
// A stream is one consumer session on a queue. OpenStream returns a
// *Stream that attaches to the queue, heartbeats in the background, hands
// out events one lease each with session-scoped delivery tags (1, 2, 3,
// …), settles them by tag (acks before nacks; SettleDelayed holds nacks
// back for a delay), keeps them past the ack timeout (Extend) and, on
// Close, puts what it did not settle back in the queue. SSE, gRPC and the
// gorilla WebSocket bridge drive it.
//
// A transport that keeps nothing in memory between requests (the API
// Gateway WebSocket bridge, one Lambda invocation per client frame) uses
// the stateless form with the same rules: OpenSession returns a
// SessionState the caller stores, PollSession (with PollParams) pulls and
// heartbeats, SessionState.Tag and Take keep the tags, SettleRefs (or
// SettleRefsDelayed) and AckDeliveries settle, ExtendTags keeps events
// past the ack timeout, CloseSession ends it. Events a principal may not
// read are never handed to its sessions (they wait for one that may, not
// counted as delivered); poison events go to the dead-letter queue at
// once. docs/streams-design.md has the design.
//
// # Dead letters
//
// A lease past the delivery limit, or events past their TTL or the
// queue's max length, move to the deployment-wide dead-letter queue.
// ListDeadLetters pages through it; ActOnDeadLetters replays (to the
// exact origin queue; a gone origin leaves the dead letter in place),
// discards or leaves each, one result per action.
//
// The operator's triage stream (ManageDeadLetteredEvents) has one set of
// rules, kept in TriageState, a JSON-encodable value: each dead letter is
// shown once per session with the next tag (Show), actions are resolved
// against the tags (Plan) and run by ActOnTriage, and a replayed or
// discarded dead letter's tag is retired (Retire). ListForTriage finds
// what a session has not shown. Triage wraps a TriageState in memory,
// safe for concurrent use, for the gRPC stream and the gorilla WebSocket
// bridge; the API Gateway bridge stores its TriageState in the connection
// record, bounded, and prunes it (Prune) from complete listings.
//
// # Errors
//
// Errors are package herr's coded errors, mapped to HTTP and gRPC
// statuses once by the transports; messages are caller-safe. Outcomes a
// caller must tell apart are typed, matched with errors.As:
// *ConsumerCancelledError (herr.Internal with the notifications API's
// exact ConsumerCancelledMessage) when a stream's session was taken away
// while its queue is intact — the client reconnects; and, from the store,
// *leasestore.WindowFullError when a consumer's in-flight window is full.
// A queue that is gone is herr.NotFound.
package delivery
