// Package leasestore is the consumer state machine of seed 000 ("Durable
// consumers") and seed 002 (durable and non-durable queues, stream
// sessions, bounded redelivery and the dead-letter queue), and its
// persistence over gocloud.dev/docstore.
//
// # Model
//
// A consumer delivers events in its own order. Every event it hands out
// takes the consumer's next position (1, 2, 3, …); a lease is a contiguous
// range of positions given to one worker for a visibility timeout. The
// `sequence` of an event is its position formatted by
// cloudevent.FormatSequence, so sequences compare as strings in delivery
// order. The committed cursor is the highest position p such that every
// position ≤ p is acknowledged or dead-lettered; it never moves backward and
// never passes an unacknowledged lease.
//
// Seed 000's durable consumers take leased batches (Pull, Acknowledge).
// Seed 002's queues are read by streams: a stream attaches as a session
// (Attach, heartbeats with Attach, Detach), takes single-event leases
// (PullEvents) and settles them one by one, acks before nacks (Settle).
// A lease's Attempt is its events' lifetime delivery count: it grows on
// every redelivery, whatever requeued it (a failed or nacked lease, an
// expired visibility timeout, a session that detached, was evicted or let
// its TTL lapse), and is never reset.
//
// # Records
//
// Everything lives in one docstore collection whose key field is "key":
//
//	key "c:<consumer id>"             kind "consumer"    the consumer: type,
//	                                  filters, subscription, paused flag, next
//	                                  position, cursor, its open leases, the
//	                                  acked ranges beyond the cursor, its
//	                                  sessions, message TTL and max length
//	key "p:<consumer id>:<payload>"   kind "payload"     encoded events that
//	                                  leases of the consumer refer to (a lease
//	                                  names its payload and an offset)
//	key "d:<consumer id>:<incarnation>:<position>"
//	                                  kind "deadletter"  one dead-lettered
//	                                  event (see DeadLetter)
//	key "w:<connection id, base64url>"
//	                                  kind "wsconnection" the state of one
//	                                  WebSocket connection of the API Gateway
//	                                  bridge (see Connection)
//	key "k:<claim id, base64url>"     kind "claim"       one encoded event of
//	                                  the claim-check, too big for its broker
//	                                  (see PutClaim)
//
// The lease table, the acked ranges and the sessions are each stored as
// one compact binary value (codec.go), and a lease names its worker (and a
// session its id) by a fixed-size digest: a full table of 1,000 leases
// with 999 acked ranges between them takes about 75 KB, and the largest
// queue record (1,000 single-event leases of 1,000 sessions, with removed
// sessions remembered) about 150 KB, so the record fits a DynamoDB item
// and rewriting it on every state change stays affordable.
//
// Keeping a consumer's whole lease table in one record makes every state
// change a single revision-conditional write (docstore Replace with the
// revision read), which every backend (memdocstore, DynamoDB, Firestore)
// performs atomically; no transaction across records and no in-process lock
// decides correctness. Two store clients racing on one consumer both read,
// one write wins, the other re-reads and tries again.
//
// # Cost
//
// What these records cost on DynamoDB and Firestore, per delivered event,
// is measured by storetest.RunCostBenchmarks (`make bench-cost`) and
// tabled in docs/cost-model.md. The consumer record is this layout's
// limit: every pull of new work, every settlement and every heartbeat
// rewrites it, and its size grows with the leases held (about 7 KB with
// 100 leases, 75 KB with 1,000), so it is the most-written key and its
// write rate caps a consumer's throughput (DynamoDB's 1,000 write units per
// second per key; Firestore's advice of about one write per second per
// document). docs/cost-model.md gives the figures and the layout that
// lifts that limit (a record per lease and a small consumer head).
//
// The lease table stays small: at most MaxInFlight (1,000) events held,
// so at most 1,000 leases, plus acked ranges that are merged as they
// touch. A payload record holds at most Options.MaxPayloadBytes of encoded
// events (default 350,000 bytes, below DynamoDB's 400 KB item and
// Firestore's 1 MiB document limits): when a batch of large events would not
// fit, the pull returns fewer events, never fewer than one. Leases share a
// payload record when they are parts of one received batch (PullEvents'
// single-event leases, or a lease split because a pull's limit was smaller
// than it); the payload is deleted with the last lease that refers to it.
//
// # Custody transfer
//
// A pull that needs new work receives from a Source, writes the payload
// record, then the consumer record holding the new lease, and only then acks
// the received messages at the broker. A crash between the writes and the
// broker ack leaves the messages to be redelivered by the broker after its
// ack deadline: a duplicate at most, never a loss.
//
// # Dead letters
//
// An event leaves its consumer for the dead-letter queue in three steps,
// each safe to repeat: a conditional write of the consumer record marks
// its lease dying (no one is handed it or can acknowledge it from then
// on); the dead-letter records are written under deterministic keys; a
// second conditional write removes the lease and marks its positions
// acknowledged, so the cursor passes them. Whoever next meets a dying lease
// (a pull, ExpireLeases) finishes an interrupted move. A failure therefore
// leaves the event in the consumer, or in both places, never in neither;
// and finishing twice rewrites the same records. Replay goes the other way:
// the event is written back to its origin consumer first, and only then is
// the dead letter deleted.
//
// # Errors
//
// herr.NotFound for an unknown consumer or dead letter;
// herr.FailedPrecondition for a paused consumer, and for a session that is
// not attached (PullEvents) or was removed by someone else (Attach,
// PullEvents: "consumer cancelled"); *WindowFullError
// (herr.ResourceExhausted) when the in-flight window is full;
// herr.InvalidArgument for bad arguments; herr.Aborted when a write lost
// its race too many times; herr.Unavailable (or the backend's own code)
// when the store fails.
package leasestore
