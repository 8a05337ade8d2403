// @heraldevents/client: Herald's client for browsers, Node 20+, Deno and
// Bun. See README.md and docs/typescript.md in Herald's repository.
import { HeraldClient } from "./client.js";
import { consume, type ConsumeOptions, type Handler } from "./consume.js";
import { EventStream, type NonDurableOptions, type StreamOptions } from "./sse.js";
import { WebSocketStream, type WebSocketOptions, type WebSocketTarget } from "./websocket.js";

export * from "./client.js";
export * from "./consume.js";
export * from "./errors.js";
export * from "./sse.js";
export * from "./types.js";
export * from "./websocket.js";
export type { components, paths, operations } from "./openapi.js";

declare module "./client.js" {
  interface HeraldClient {
    /** Runs durable-consumer pull workers (see consume). */
    consume(destinationId: string, handler: Handler, options?: ConsumeOptions): Promise<void>;
    /** A Server-Sent Events stream from a non-durable queue (GET /api/v1beta/events/stream). */
    streamEvents(options?: NonDurableOptions): EventStream;
    /** A Server-Sent Events stream from a durable queue (GET /api/v1beta/events/stream-durable). */
    streamDurable(queueId: string, options?: StreamOptions): EventStream;
    /** A WebSocket stream: non-durable, or durable with ack/nack (GET /api/v1beta/events/websocket). */
    websocket(target: WebSocketTarget, options?: WebSocketOptions): WebSocketStream;
  }
}

HeraldClient.prototype.consume = function (this: HeraldClient, destinationId, handler, options) {
  return consume(this, destinationId, handler, options);
};
HeraldClient.prototype.streamEvents = function (this: HeraldClient, options = {}) {
  return new EventStream(this, undefined, options);
};
HeraldClient.prototype.streamDurable = function (this: HeraldClient, queueId, options = {}) {
  return new EventStream(this, queueId, options);
};
HeraldClient.prototype.websocket = function (this: HeraldClient, target, options = {}) {
  return new WebSocketStream(this, target, options);
};
