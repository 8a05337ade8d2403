// The REST shapes, by name, from the types openapi-typescript generates
// from Herald's OpenAPI document (src/openapi.ts, `npm run generate`). A
// server change that breaks them fails `tsc` here, and the test
// "openapi.ts is generated from the document" fails until they are
// regenerated.
import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/**
 * An event to publish: `event_type`, `message`, `occurred_at`, `resource`,
 * and optionally `idempotency_key`, the event's own idempotency key (1–200
 * printable ASCII characters, never echoed; docs/api.md, "Idempotency
 * keys"). In a publishBatch, events with keys are each replayed or
 * published on their own and the call sends no Idempotency-Key header
 * (PublishOptions).
 */
export type PublishEvent = Schemas["PublishEvent"];
/** An event as a publish result echoes it, normalized. */
export type PublishedEvent = Schemas["Event"];
/**
 * One event's publish result: `success` false says it was not published;
 * `replayed` true says it answers a repeat of the publish's idempotency
 * key, the event published once by an earlier attempt (the client sets it
 * false when Herald leaves it out).
 */
export type PublishResult = Schemas["PublishingResult"] & { replayed: boolean };
/** `{"event_type", "filters": [{"filter_type", "resource_id"}]}`. */
export type FilterGroup = Schemas["FilterGroup"];
/** One resource-id condition of a filter group. */
export type ResourceFilter = Schemas["ResourceFilter"];
/** A destination (durable consumer or queue) as Herald lists it. */
export type Destination = Schemas["Destination"];
/** The body of `POST /v1/event-destinations`. */
export type CreateDestinationRequest = Schemas["CreateDestinationRequest"];
/** A leased batch: `leaseId`, `generation`, `attempt`, `expiresAt`, `events`. */
export type Lease = Schemas["Lease"];
/** A CloudEvent 1.0 as a lease carries it, with `sequence`. */
export type CloudEvent = Schemas["CloudEvent"];
/** Herald's answer to an acknowledgement. */
export type AcknowledgeResponse = Schemas["AcknowledgeResponse"];
/** Herald's answer to an extension. */
export type ExtendResponse = Schemas["ExtendResponse"];
/** The body of `POST /api/v1beta/queues/durable`. */
export type CreateDurableQueueRequest = Schemas["CreateDurableQueueRequest"];
/** A durable queue as `POST /api/v1beta/queues/durable` answers it. */
export type DurableQueue = Schemas["DurableQueue"];
/** An event as the streams (SSE, WebSocket) deliver it. */
export type ConsumerEvent = Schemas["ConsumerEvent"];
/** The data of an SSE `error` frame. */
export type StreamErrorBody = Schemas["StreamError"];
/** One dead letter. */
export type DeadLetter = Schemas["DeadLetter"];
/** A page of dead letters. */
export type DeadLetterPage = Schemas["DeadLetterPage"];
/** The status of an acknowledgement: `ok` commits, `failed` requeues, `rejected` dead-letters. */
export type AckStatus = Schemas["AcknowledgeRequest"]["status"];
