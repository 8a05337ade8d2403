// Package leasestore is the durable-consumer state machine of seed 000
// ("Durable consumers") and its persistence over gocloud.dev/docstore.
//
// # Model
//
// A consumer delivers events in its own order. Every event it hands out
// takes the consumer's next position (1, 2, 3, …); a lease is a contiguous
// range of positions given to one worker for a visibility timeout. The
// `sequence` of an event is its position formatted by
// cloudevent.FormatSequence, so sequences compare as strings in delivery
// order. The committed cursor is the highest position p such that every
// position ≤ p belongs to an acknowledged lease; it never moves backward and
// never passes an unacknowledged lease.
//
// # Records
//
// Everything lives in one docstore collection whose key field is "key":
//
//	key "c:<consumer id>"             kind "consumer"  the consumer: filters,
//	                                  subscription, paused flag, next position,
//	                                  cursor, its open leases and the acked
//	                                  ranges beyond the cursor
//	key "p:<consumer id>:<lease id>"  kind "payload"   the encoded events of
//	                                  one lease, in order
//
// The lease table and the acked ranges are each stored as one compact
// binary value (codec.go), and a lease names its worker by a fixed-size
// digest of the worker id: a full table of 1,000 leases with 999 acked
// ranges between them takes about 75 KB, so the record fits a DynamoDB
// item and rewriting it on every state change stays cheap.
//
// Keeping a consumer's whole lease table in one record makes every state
// change a single revision-conditional write (docstore Replace with the
// revision read), which every backend (memdocstore, DynamoDB, Firestore)
// performs atomically; no transaction across records and no in-process lock
// decides correctness. Two store clients racing on one consumer both read,
// one write wins, the other re-reads and tries again.
//
// The lease table stays small: at most MaxInFlight (1,000) unacknowledged
// events, so at most 1,000 leases, plus acked ranges that are merged as they
// touch. A payload record holds at most Options.MaxPayloadBytes of encoded
// events (default 350,000 bytes, below DynamoDB's 400 KB item and
// Firestore's 1 MiB document limits): when a batch of large events would not
// fit, the pull returns fewer events, never fewer than one.
//
// # Custody transfer
//
// A pull that needs new work receives from a Source, writes the payload
// record, then the consumer record holding the new lease, and only then acks
// the received messages at the broker. A crash between the writes and the
// broker ack leaves the messages to be redelivered by the broker after its
// ack deadline: a duplicate at most, never a loss.
//
// # Errors
//
// herr.NotFound for an unknown consumer, herr.FailedPrecondition for a
// paused one, *WindowFullError (herr.ResourceExhausted) when the in-flight
// window is full, herr.Aborted when a write lost its race too many times.
package leasestore
