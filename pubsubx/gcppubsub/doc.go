// Package gcppubsub is Herald's pubsubx driver for Google Cloud Pub/Sub:
// one topic per deployment, a subscription (or, briefly after a filter
// change, a few) per Herald consumer, created, re-filtered and deleted at
// run time, and read with synchronous Pull.
//
// It talks to Pub/Sub through the low-level clients of
// cloud.google.com/go/pubsub/v2/apiv1 rather than gocloud.dev's
// gcppubsub drivers: those have no way to create a subscription, and the
// v2 one uses StreamingPull, which delivers more than it is asked for
// (DESIGN.md, "Known traps").
//
// # URLs
//
//	gcppubsub://projects/PROJECT/topics/TOPIC?ackdeadline=60s&expiration=never
//
// The URL is parsed here, not by gocloud's opener. The clients find
// credentials the usual way (Application Default Credentials), and when
// PUBSUB_EMULATOR_HOST is set they talk to that emulator without any.
// Query parameters:
//
//   - ackdeadline: the ack deadline of the subscriptions this broker
//     creates, a Go duration from 10s to 600s (Pub/Sub's range), rounded
//     to whole seconds; default 60s. A subscription keeps the deadline it
//     was created with.
//   - expiration: Pub/Sub's expiration policy for the subscriptions this
//     broker creates: a subscription with no pull or other activity for
//     this long is deleted by Pub/Sub. "never" or 0 (the default) means
//     it never expires, and Herald's own idle sweeper (a queue's idle
//     window) deletes it; otherwise a Go duration of at least 24h
//     (Pub/Sub's minimum). Set it a little above the longest idle window
//     as a safety net for subscriptions a crashed sweeper left behind.
//
// Unknown parameters are refused with herr.InvalidArgument. Open takes the
// same settings as Options, plus client options (an endpoint for pstest,
// for example).
//
// The topic is created on first use when it does not exist (that needs
// the pubsub.topics.create permission; without it, create the topic
// beforehand). Concurrent first calls of one broker share one CreateTopic
// and wait for it, so a burst of streams opening on a fresh deployment
// all succeed; a call that still finds the topic missing right after it
// was created answers herr.Unavailable, never NotFound. Subscriptions retain unacknowledged messages for 7 days
// (MessageRetention).
//
// # Names
//
// Herald names subscriptions "herald-dc-<uuid>" and "herald-q-<queue_id>"
// (queue ids up to 200 characters of [A-Za-z0-9._-]). Pub/Sub subscription
// ids are 3–255 characters of [A-Za-z0-9-_.~+%], start with a letter, and
// are unique per project rather than per topic. Generation N of Herald
// subscription NAME on topic TOPIC is the subscription id
//
//	esc(TOPIC) "~" esc(NAME) "~g" N
//
// where esc keeps letters, digits and "-_.+" and writes every other byte,
// '~' and '%' included, as %XX. The mapping is deterministic, so every
// process derives the same ids, and injective. Herald's own names pass
// unchanged: "herald-events~herald-q-orders~g1". When esc(TOPIC) "~"
// esc(NAME) is longer than 233 bytes (room for "~g" and any generation
// number) it is cut to 199 bytes and followed by "~~" and 32 hex digits of
// the SHA-256 of topic and name.
//
// # Delivery semantics
//
// At least once. Receive uses synchronous Pull with return_immediately,
// asking each Pull for no more than is still missing, and polls (10 ms
// doubling to 200 ms) until a message arrives or the wait passes: nothing
// is received that is not returned. A pull that the caller's context cuts
// off is allowed pullGrace to finish, and what it brought is nacked. Ack is
// Acknowledge; Nack is ModifyAckDeadline to 0, which makes the message
// available again at once. An abandoned message comes back after the
// subscription's ack deadline.
//
// Order: none. Messages carry no ordering key, so Pub/Sub delivers them
// in any order, and a nacked message may come back before or after
// newer ones.
//
// # Filters
//
// Filter groups are pushed down as a Pub/Sub filter expression on the
// event_type and resource_id attributes: a group is
// `attributes.event_type = "T"` ANDed with its resource conditions ORed
// (`attributes.resource_id = "X"` for eq, `hasPrefix(attributes.resource_id,
// "P")` for deep and shallow prefixes, the deep one being a superset of
// the shallow one), and groups are ORed. A group whose filters include a
// greedy or lazy "" pushes down its event type only, since it must match
// events without a resource_id. The expression is always a superset of
// what the groups match; the Herald handler re-checks every message with
// filter.Groups.Match. Pub/Sub limits an expression to 256 bytes
// (MaxFilterBytes): a longer one pushes down less, first dropping the
// resource conditions of the groups with the longest ones, then, if the
// event types alone do not fit, no filter at all. Quotes and backslashes
// in values are escaped with a backslash; values with control characters
// are not pushed down. Google's emulator ignores filters altogether;
// pstest and Pub/Sub apply them.
//
// Pub/Sub filters cannot be changed, so UpdateSubscription works in
// generations. It creates generation N+1 with the new filter and leaves
// generation N alone; from then on new messages that pass the new filter
// reach N+1, and N keeps what it held. Receive pulls from the oldest
// generation first and then the newer ones. Generations are found with
// the admin API (ListTopicSubscriptions, keeping the names with the
// subscription's prefix); a process caches them, but every Receive round
// probes for the generation after the newest it knows and re-lists when a
// generation it knew answers NotFound, so no process's memory decides
// what is delivered. During the overlap a message can be in two
// generations and be delivered twice, which at-least-once allows. To keep
// the overlap short, each generation carries a label (herald-created) with
// a time its creation cannot be later than (the request time plus the
// 30 s RPC bound), and an old generation's messages published more than a
// minute (dedupeMargin, the clock skew tolerated between Herald's hosts
// and Google's) after the next generation's label are acked there and not
// returned, since the next generation has them. A process deletes an
// old generation once it has taken nothing from it for that generation's
// ack deadline plus 10 s, in pulls no further apart than the ack deadline,
// and only while a newer one exists. An UpdateSubscription whose
// expression equals the newest generation's creates nothing.
// DeleteSubscription deletes every generation.
//
// # Errors
//
// Every method returns herr-coded errors. gRPC status codes map through
// one table (grpcCodes): NOT_FOUND → herr.NotFound, ALREADY_EXISTS →
// herr.AlreadyExists, INVALID_ARGUMENT → herr.InvalidArgument,
// RESOURCE_EXHAUSTED → herr.ResourceExhausted, and UNAVAILABLE,
// DEADLINE_EXCEEDED, INTERNAL, UNKNOWN and connection errors →
// herr.Unavailable (retryable). The caller's own cancellation or deadline
// gives herr.Canceled or herr.DeadlineExceeded. Every call on a closed
// broker fails with herr.Unavailable. The clients' automatic retries are
// off: each call is one attempt of at most 30 s, and callers retry what
// herr.Retryable allows.
//
// # Connections
//
// The Pub/Sub clients keep one gRPC channel, which connects and, when the
// connection breaks, reconnects in the background with its own backoff;
// no call dials and no lock of this package is held across an RPC. Every
// RPC is bounded by the caller's context, so a server that accepts TCP
// and never answers costs a call its deadline and no more. Ping
// is one GetTopic.
//
// # Limits
//
//   - Body: at most MaxMessageBytes (Pub/Sub's 10 MB request limit less
//     8 KiB for attributes); a larger one fails Send with
//     herr.InvalidArgument. Attribute values: 1024 bytes (Pub/Sub), which
//     is filter.MaxResourceIDLength.
//   - Filter expressions: 256 bytes, pushed down partially beyond that.
//   - Ack deadline: 10–600 s on Pub/Sub.
//   - Backlog: Pub/Sub bounds a subscription's backlog by nothing but
//     time: a message nobody acknowledges is dropped after the
//     subscription's message retention (MessageRetention, 7 days, or the
//     expiration when shorter), not dead-lettered. So a subscription
//     nobody reads holds at most what is published to it in 7 days.
//     Herald takes the backlog of a queue with a maximum length into the
//     lease store well before (package delivery).
//   - Old generations: an overlap of at least the ack deadline plus 10 s
//     after an update, with possible duplicates.
//   - A process that deletes an old generation cannot see messages that
//     another process received from it moments before; if that process
//     then nacks them or crashes, they are gone with the generation.
//     Pub/Sub offers no way to ask whether a subscription has messages in
//     flight; the wait of a full ack deadline with nothing taken makes
//     this need a receiver that keeps winning every message for that long
//     while this process polls the same generation.
//   - return_immediately pulls may come back empty while messages exist
//     (Pub/Sub treats it as a hint); Receive polls again until its wait
//     ends.
package gcppubsub
