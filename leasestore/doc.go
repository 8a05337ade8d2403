// Package leasestore is the consumer state machine of the durable-consumer API ("Durable
// consumers") and the notifications API (durable and non-durable queues, stream
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
// The durable-consumer API's durable consumers take leased batches (Pull, Acknowledge).
// The notifications API's queues are read by streams: a stream attaches as a session
// (Attach, heartbeats with Attach, Detach), takes single-event leases
// (PullEvents) and settles them one by one, acks before nacks (Settle).
// A queue with a maximum length also takes its broker backlog in ahead of
// delivery (Intake), which dead-letters the oldest past the maximum
// (ReasonMaxLen).
// A lease's Attempt is its events' lifetime delivery count: it grows on
// every redelivery, whatever requeued it (a failed or nacked lease, an
// expired visibility timeout, a session that detached, was evicted or let
// its TTL lapse), and is never reset.
//
// # Records
//
// Everything lives in one docstore collection whose key field is "key".
// No record written on a hot path grows with the leases, sessions or
// acknowledged ranges a consumer holds:
//
//	key "c:<consumer id>"             kind "consumer"  the head: what the
//	                                  consumer is (id, type, filters,
//	                                  subscription, paused flag, creation
//	                                  time, limits, policies, incarnation)
//	                                  in one binary attribute
//	                                  (package internal/headcfg: each stored
//	                                  attribute costs docstore allocations on
//	                                  every read), next position, a floor of
//	                                  the cursor,
//	                                  the sessions, the index of open
//	                                  blocks (about 7 bytes each, see
//	                                  blockEntry), and the settled blocks
//	                                  kept for the acknowledgements they
//	                                  remember (at most MaxRememberedBlocks,
//	                                  about 3 bytes each, see keptList): a
//	                                  few hundred bytes
//	key "l:<consumer id>:<incarnation>:<start, 20 digits>"
//	                                  kind "block"     one reservation of
//	                                  positions and its unsettled leases (about
//	                                  30 bytes each; 100 at most for a pull),
//	                                  and the acknowledgements applied to its
//	                                  leases (about 12 bytes each; see
//	                                  RememberAcks): once settled it is kept,
//	                                  without payload, for a repeated
//	                                  acknowledgement
//	key "p:<consumer id>:<payload id>" kind "payload"  a block's events, packed
//	                                  and zstd-compressed (see eventBatch)
//	key "d:<consumer id>:<incarnation>:<position>"
//	                                  kind "deadletter" one dead-lettered
//	                                  event (see DeadLetter)
//	key "w:<connection id, base64url>"
//	                                  kind "wsconnection" the state of one
//	                                  WebSocket connection of the API Gateway
//	                                  bridge (see Connection)
//	key "k:<claim id, base64url>"     kind "claim"     one encoded event of
//	                                  the claim-check, too big for its broker
//	                                  (see PutClaim)
//	key "i:<SHA-256 of principal and key, base64url>"
//	                                  kind "idempotency" one idempotency key
//	                                  of a keyed publish: claimed or done,
//	                                  its plan and result, expiring by TTL
//	                                  (see ClaimKey)
//
// A pull of new work receives from the Source, writes the payload, then
// reserves positions: one atomic group (docstore's AtomicWrites, a DynamoDB
// transaction, a Firestore commit) writes the head, whose next position
// moves and whose index gains an entry, and creates the block over those
// positions. Concurrent reservations of one consumer in one Store share
// that write (reserve.go), and a reservation only has to be redone when
// the head changed in a way that changes the puller's decision (a lease
// became reclaimable, or the puller got a lease elsewhere); pullers of one
// consumer in different processes contend only on the head, once per
// pull. A lease id is a UUID that names its block (leaseID), so an
// acknowledgement reads the head and that one block and writes only the
// block; a stream's settlements are grouped per round trip by a Batcher.
// A failed acknowledgement or a nack also lowers the block's hint in the
// head (blockEntry.Until), so the next pull reads that block.
//
// The committed cursor is not written by acknowledgements: it is the
// highest position p such that every position ≤ p is settled, and Store
// walks it from the head's floor over the index (a block that is gone or
// empty is settled; the first open block's lowest lease ends the walk).
// The head's floor and index are brought up to date whenever the head is
// written anyway (a reservation) and by ExpireLeases; what a Store learns
// in between (blocks it emptied or found gone) it remembers and applies at
// its next head write.
//
// Sessions are in the head: an attach, a heartbeat or a detach writes only
// the head. A session lease comes back as soon as its session is gone
// (detached, evicted, lapsed): nothing is written for that, the lease is
// simply not live any more, and the index names the session holding a
// block so that pulls read it then.
//
// Consumers stored by an earlier Herald, whose one record held the whole
// lease table, are recognised and refused with herr.FailedPrecondition
// naming how to recreate them (DeleteConsumer still deletes them); they are
// never misread.
//
// # Cost
//
// What these records cost on DynamoDB and Firestore, per delivered event,
// is measured by storetest.RunCostBenchmarks (`make bench-cost`) and
// tabled in docs/cost-model.md: at pull limit 100 about 0.55 write units
// per event, one head write per 100 events whatever the number of
// workers, and the same figures with 10 or 1,000 events in flight.
//
// A payload record holds at most Options.MaxPayloadBytes of encoded events
// before compression (default 350,000 bytes, below DynamoDB's 400 KB item
// and Firestore's 1 MiB document limits): when a batch of large events
// would not fit, the pull returns fewer events, never fewer than one. At
// most MaxInFlight (1,000) events are held, so a head indexes at most
// 1,000 blocks (about 7 KB in the worst case of single-event blocks of
// 1,000 sessions; a few hundred bytes in the common case).
//
// # Custody transfer
//
// A pull that needs new work receives from a Source, writes the payload
// record, then the head and block in one atomic group, and only then acks
// the received messages at the broker. A crash between the writes and the
// broker ack leaves the messages to be redelivered by the broker after its
// ack deadline: a duplicate at most, never a loss. A crash before the
// atomic write leaves an unreachable payload record and the messages with
// the broker.
//
// # Dead letters
//
// An event leaves its consumer for the dead-letter queue in three steps,
// each safe to repeat: a conditional write of its block marks its lease
// dying (no one is handed it or can acknowledge it from then on); the
// dead-letter records are written under deterministic keys; a second
// conditional write of the block removes the lease, so the cursor passes
// its positions. Whoever next meets a dying lease (a pull, ExpireLeases)
// finishes an interrupted move. A failure therefore leaves the event in the
// consumer, or in both places, never in neither; and finishing twice
// rewrites the same records. Replay goes the other way: the event is
// written back to its origin consumer first (a new block, with its payload
// under a key derived from the dead letter, so a repeated replay finds it),
// and only then is the dead letter deleted.
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
