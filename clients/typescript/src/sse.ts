import type { HeraldClient } from "./client.js";
import { BROKER_CANCELLED, errorFrom, HeraldError, StreamError } from "./errors.js";
import type { ConsumerEvent, FilterGroup, StreamErrorBody } from "./types.js";
import { anySignal, backoffCeiling, jitter, sleep } from "./util.js";

/** One Server-Sent Events frame. */
export interface SSEFrame {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * Parses a text/event-stream body (the WHATWG HTML "event stream
 * interpretation"): fields event, data and id; comments (": keep-alive")
 * and retry are ignored; a frame is dispatched at a blank line, with
 * "message" for a frame without an event field.
 */
export async function* parseSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEFrame> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let event = "";
  let data: string[] = [];
  let id: string | undefined;
  let first = true;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      if (first && buf.length > 0) {
        if (buf.charCodeAt(0) === 0xfeff) buf = buf.slice(1);
        first = false;
      }
      for (;;) {
        const m = /\r\n|\n|\r/.exec(buf);
        // A lone \r at the end may be the start of \r\n: wait for more.
        if (!m || (m[0] === "\r" && m.index === buf.length - 1)) break;
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === "") {
          if (data.length > 0) yield { event: event || "message", data: data.join("\n"), id };
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
        else if (field === "id" && !value.includes("\0")) id = value;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

/** The options of an SSE stream. */
export interface StreamOptions {
  /** Ends the stream: the iterator finishes. */
  signal?: AbortSignal;
  /** Called with the queue's reconnect token each time a stream to it opens (non-durable). */
  onReconnectToken?: (token: string) => void;
  /** Called when the non-durable queue had vanished (its token answered 404) and a fresh queue was opened from the filters: events published in between were missed. */
  onReset?: (err: unknown) => void;
  /** The jittered wait before a reconnect: at most initial the first time, doubling up to most (defaults 250 and 10,000 ms); back to initial once a stream delivered an event. */
  reconnectBackoffMs?: number;
  maxReconnectBackoffMs?: number;
}

/** The options of a non-durable stream. */
export interface NonDurableOptions extends StreamOptions {
  /** The queue's filter groups (absent: every event the token may receive). With reconnectToken, the filters the queue has (they are what updateFilters moves from). */
  filterGroups?: FilterGroup[];
  /** Resumes the queue this token names (within its reconnect grace, 20 s) instead of opening a fresh one. */
  reconnectToken?: string;
}

interface Update {
  groups: FilterGroup[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * A Server-Sent Events stream as an async iterator of events, read with
 * fetch so that an Authorization header is sent. It reconnects on its own
 * — after a cut connection, a clean end, 429/502/503/504/409 before the
 * stream opens, and the broker-cancelled `error` event — sending the
 * reconnect token as Last-Event-ID (a durable stream reopens its
 * queue_id). A non-durable queue that has vanished (404) is replaced by a
 * fresh one from the filters (onReset says so). Any other `error` event
 * ends the iteration with a StreamError, any other status with a
 * HeraldError.
 *
 * SSE has no client acknowledgement: Herald acknowledges a non-durable
 * event once written, a durable one HERALD_SSE_ACK_DELAY (1 s) later, so
 * events in flight when a connection drops may be lost (non-durable) or
 * delivered again (durable). For acknowledgements use websocket().
 */
export class EventStream implements AsyncIterable<ConsumerEvent> {
  private token: string | undefined;
  private filters: FilterGroup[] | undefined;
  private update: Update | undefined;
  private conn: AbortController | undefined;
  private readonly closer = new AbortController();
  private started = false;

  /** @internal */
  constructor(
    private readonly client: HeraldClient,
    private readonly durableQueueId: string | undefined,
    private readonly o: NonDurableOptions,
  ) {
    this.token = durableQueueId === undefined ? o.reconnectToken || undefined : undefined;
    this.filters = o.filterGroups;
  }

  /** The non-durable queue's reconnect token once connected (undefined before, and for a durable stream). */
  get reconnectToken(): string | undefined {
    return this.token;
  }

  /** Ends the stream: the iterator finishes. */
  close(): void {
    this.closer.abort();
  }

  /**
   * Moves a non-durable queue to new filters: the stream reconnects with its
   * token, the queue's current filters as previous_filter_groups and these
   * as filter_groups (a compare-and-set). Resolves once the stream is open
   * on them; rejects with the HeraldError (403, 422) that refused the move,
   * and the stream goes on with the filters it had. The stream reconnects
   * as its iterator is read: keep reading it while the update is pending.
   * Events written to the connection being replaced and not yet read are
   * lost, as on any disconnect of a non-durable SSE stream.
   */
  updateFilters(groups: FilterGroup[]): Promise<void> {
    if (this.durableQueueId !== undefined) {
      return Promise.reject(new Error("herald client: a durable queue's filters change with updateDurableQueueFilters"));
    }
    if (!this.started) {
      this.filters = groups;
      return Promise.resolve();
    }
    this.update?.reject(new Error("herald client: superseded by a later updateFilters"));
    return new Promise((resolve, reject) => {
      this.update = { groups, resolve, reject };
      this.conn?.abort();
    });
  }

  [Symbol.asyncIterator](): AsyncIterator<ConsumerEvent> {
    if (this.started) throw new Error("herald client: a stream is iterated once");
    this.started = true;
    return this.run();
  }

  private async *run(): AsyncGenerator<ConsumerEvent> {
    const o = this.o;
    const done = anySignal([o.signal, this.closer.signal]);
    const initial = o.reconnectBackoffMs ?? 250;
    const most = o.maxReconnectBackoffMs ?? 10_000;
    let failures = 0;
    try {
      while (!done.aborted) {
        let wait = 0; // a server's Retry-After
        let got = 0;
        const conn = new AbortController();
        this.conn = conn;
        const update = this.update;
        try {
          const res = await this.open(update, anySignal([done, conn.signal]));
          if (!res.ok) {
            const err = await errorFrom(`GET ${this.path()}`, res);
            if (update && this.update === update && (err.status === 403 || err.status === 422)) {
              this.update = undefined;
              update.reject(err);
              continue;
            }
            if (this.vanished(err.status)) {
              this.reset(err);
              continue;
            }
            if (!reconnectableStatus(err.status)) throw err;
            wait = err.retryAfterMs;
          } else {
            for await (const f of parseSSE(res.body!)) {
              if (f.event === "connected") {
                if (this.durableQueueId === undefined && f.id) {
                  this.token = f.id;
                  o.onReconnectToken?.(f.id);
                }
                if (update && this.update === update) {
                  this.filters = update.groups;
                  this.update = undefined;
                  update.resolve();
                }
              } else if (f.event === "event") {
                got++;
                failures = 0;
                yield JSON.parse(f.data) as ConsumerEvent;
              } else if (f.event === "error") {
                const body = JSON.parse(f.data) as StreamErrorBody;
                const err = new StreamError(body.status_code, body.message);
                if (body.status_code === 500 && body.message.startsWith(BROKER_CANCELLED)) break; // reconnect
                if (this.vanished(body.status_code)) {
                  this.reset(err);
                  break;
                }
                throw err;
              }
            }
          }
        } catch (err) {
          if (done.aborted) return;
          if (err instanceof HeraldError || err instanceof StreamError || err instanceof SyntaxError) throw err;
          // A cut connection, or our own abort for a filter update.
          if (conn.signal.aborted && this.update !== undefined) continue;
        }
        if (got > 0) failures = 0;
        failures++;
        await sleep(Math.max(wait, jitter(backoffCeiling(initial, most, failures))), done);
      }
    } finally {
      this.conn?.abort();
      this.update?.reject(new Error("herald client: the stream ended"));
      this.update = undefined;
    }
  }

  private path(): string {
    return this.durableQueueId === undefined ? "/api/v1beta/events/stream" : "/api/v1beta/events/stream-durable";
  }

  /** A non-durable queue named by our token is gone: a fresh stream from the filters fixes it. */
  private vanished(status: number): boolean {
    return status === 404 && this.durableQueueId === undefined && this.token !== undefined;
  }

  private reset(err: unknown): void {
    this.token = undefined;
    this.o.onReset?.(err);
  }

  private async open(update: Update | undefined, signal: AbortSignal): Promise<Response> {
    const q: Record<string, string | undefined> = {};
    const headers = await this.client.headers({ Accept: "text/event-stream" });
    if (this.durableQueueId !== undefined) {
      q.queue_id = this.durableQueueId;
    } else {
      const groups = update ? update.groups : this.filters;
      if (groups !== undefined) q.filter_groups = JSON.stringify(groups);
      if (update && this.token !== undefined) q.previous_filter_groups = JSON.stringify(this.filters ?? []);
      if (this.token !== undefined) headers.set("Last-Event-ID", this.token);
    }
    return this.client.fetch(this.client.url(this.path(), q), { headers, signal, cache: "no-store" });
  }
}

/** Statuses before a stream opens that a reconnect may fix. */
export function reconnectableStatus(s: number): boolean {
  return s === 409 || s === 429 || s === 500 || s === 502 || s === 503 || s === 504;
}
