import type { HeraldClient } from "./client.js";
import { BROKER_CANCELLED, StreamError } from "./errors.js";
import type { ConsumerEvent, FilterGroup } from "./types.js";
import { backoffCeiling, jitter, sleep } from "./util.js";

/** The WebSocket subprotocol Herald speaks (docs/websocket.md). */
export const SUBPROTOCOL = "herald.v1";

/** The most remembered acknowledgements carried across reconnects. */
const MAX_CARRIED = 10_000;

/** A WebSocket constructor: the platform's (browsers, Node 22+, Deno, Bun) or a compatible one (the `ws` package). */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocket;

/** Which stream a WebSocket carries. */
export type WebSocketTarget =
  | { stream: "durable"; queueId: string }
  | { stream: "non_durable"; filterGroups?: FilterGroup[]; reconnectToken?: string };

/** The options of a WebSocket stream. */
export interface WebSocketOptions {
  /** Ends the stream: the iterator finishes and the socket closes. */
  signal?: AbortSignal;
  /** The credit kept with the server: how many events it may push ahead of the iterator (1–1000, default 100). */
  credit?: number;
  /** The WebSocket constructor (default globalThis.WebSocket; Node 20 needs --experimental-websocket or the `ws` package). */
  WebSocket?: WebSocketConstructor;
  /** Called with the non-durable queue's reconnect token each time a stream to it opens. */
  onReconnectToken?: (token: string) => void;
  /** Called when the non-durable queue had vanished (404) and a fresh one was opened from the filters. */
  onReset?: (err: unknown) => void;
  /** Reconnect backoff, as for SSE streams (defaults 250 and 10,000 ms). */
  reconnectBackoffMs?: number;
  maxReconnectBackoffMs?: number;
}

/**
 * How a settlement ended: the server acknowledged the event ("acked") or
 * handed it back ("nacked"); "skipped" when the server no longer knew the
 * tag (settled already, or redelivered elsewhere after its ack timeout);
 * "carried" when the connection ended before the answer: the stream
 * remembers the settlement and applies it to the event's redelivery on
 * the next connection, which the iterator then does not yield again.
 */
export type Settlement = "acked" | "nacked" | "skipped" | "carried";

/** One event from a WebSocket stream. */
export interface Delivery {
  event: ConsumerEvent;
  /** The delivery tag on its connection (durable streams), 0 on a non-durable one. */
  deliveryTag: number;
  /** How often the event has been delivered, this time included. */
  deliveryCount: number;
  /** Acknowledges a durable event. */
  ack(): Promise<Settlement>;
  /** Hands a durable event back, to be delivered again after delaySeconds (0–43,200; absent: the queue's retry policy). */
  nack(delaySeconds?: number): Promise<Settlement>;
}

type Frame = Record<string, unknown> & { type: string };

interface Pending {
  resolve: (s: Settlement) => void;
  reject: (err: unknown) => void;
  kind: "ack" | "nack";
  delay: number | undefined;
  eventId: string | undefined;
}

/** One connection's state. */
interface Conn {
  ws: WebSocket;
  open: boolean; // connected frame seen
  closed: boolean;
}

/**
 * A WebSocket stream (docs/websocket.md) as an async iterator of
 * deliveries, with flow control (demand), ack/nack by delivery tag on a
 * durable queue, and reconnects: after a cut connection, a going-away
 * close (1001) and the broker-cancelled fatal error it reopens the queue
 * (a non-durable one by its reconnect token); a non-durable queue that has
 * vanished (404) is replaced by a fresh one from the filters. Any other
 * fatal error ends the iteration with a StreamError.
 *
 * No acknowledgement is lost across a reconnect: one sent on a connection
 * that ended before the server answered it, or asked for after the
 * connection ended, is remembered by the event's id and applied to the
 * event when it is delivered again (the iterator does not yield it twice).
 * The token travels as the access_token query parameter, the one way
 * every WebSocket client (browsers included) can send it.
 */
export class WebSocketStream implements AsyncIterable<Delivery> {
  private readonly credit: number;
  private readonly Ctor: WebSocketConstructor;
  private token: string | undefined;
  private filters: FilterGroup[] | undefined;
  private conn: Conn | undefined;
  private connSeq = 0;
  private frameSeq = 0;
  private readonly pending = new Map<string, Pending>(); // by frame id
  private readonly carried = new Map<string, { kind: "ack" | "nack"; delay: number | undefined }>(); // by event id
  private readonly buffer: Delivery[] = [];
  private notify: (() => void) | undefined;
  private failure: unknown;
  private ended = false;
  private taken = 0; // events handed out since the last demand
  private started = false;
  private readonly closer = new AbortController();
  private update: { groups: FilterGroup[]; resolve: () => void; reject: (err: unknown) => void } | undefined;

  /** @internal */
  constructor(
    private readonly client: HeraldClient,
    private readonly target: WebSocketTarget,
    private readonly o: WebSocketOptions,
  ) {
    this.credit = o.credit ?? 100;
    if (!Number.isInteger(this.credit) || this.credit < 1 || this.credit > 1000) throw new Error("herald client: credit must be 1-1000");
    const C = o.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (C === undefined) throw new Error("herald client: no WebSocket on this platform: pass options.WebSocket");
    this.Ctor = C;
    if (target.stream === "non_durable") {
      this.token = target.reconnectToken || undefined;
      this.filters = target.filterGroups;
    }
    o.signal?.addEventListener("abort", () => this.close(), { once: true });
  }

  /** The non-durable queue's reconnect token once connected. */
  get reconnectToken(): string | undefined {
    return this.token;
  }

  /** Ends the stream: the iterator finishes and the socket closes (unsettled events go back to the queue). */
  close(): void {
    this.closer.abort();
    this.ended = true;
    this.update?.reject(new Error("herald client: the stream ended"));
    this.update = undefined;
    this.conn?.ws.close(1000);
    this.wake();
  }

  [Symbol.asyncIterator](): AsyncIterator<Delivery> {
    if (this.started) throw new Error("herald client: a stream is iterated once");
    this.started = true;
    void this.loop();
    return this.iterate();
  }

  private async *iterate(): AsyncGenerator<Delivery> {
    try {
      for (;;) {
        const d = this.buffer.shift();
        if (d !== undefined) {
          this.taken++;
          this.topUp();
          yield d;
          continue;
        }
        if (this.failure !== undefined) throw this.failure;
        if (this.ended) return;
        await new Promise<void>((r) => (this.notify = r));
      }
    } finally {
      this.close();
    }
  }

  private wake(): void {
    const n = this.notify;
    this.notify = undefined;
    n?.();
  }

  /** Sends more demand once half of the credit was handed out. */
  private topUp(): void {
    const c = this.conn;
    if (c?.open && !c.closed && this.taken >= Math.ceil(this.credit / 2)) {
      this.send(c, { type: "demand", n: this.taken });
      this.taken = 0;
    }
  }

  private send(c: Conn, f: Frame): void {
    c.ws.send(JSON.stringify(f));
  }

  /** Connects, and reconnects, until the stream ends. */
  private async loop(): Promise<void> {
    const initial = this.o.reconnectBackoffMs ?? 250;
    const most = this.o.maxReconnectBackoffMs ?? 10_000;
    let failures = 0;
    while (!this.ended) {
      let got = 0;
      try {
        got = await this.connectOnce();
      } catch (err) {
        this.failure = err;
        this.ended = true;
        this.wake();
        return;
      }
      if (this.ended) return;
      if (got > 0) failures = 0;
      failures++;
      await sleep(jitter(backoffCeiling(initial, most, failures)), this.closer.signal);
    }
  }

  /** Runs one connection; resolves with how many events it delivered when it should be reopened, rejects when the stream must end. */
  private async connectOnce(): Promise<number> {
    const bearer = await this.client.bearer();
    if (this.ended) return 0;
    const u = new URL(this.client.url("/api/v1beta/events/websocket", bearer ? { access_token: bearer } : undefined));
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    const ws = new this.Ctor(u.toString(), SUBPROTOCOL);
    const c: Conn = { ws, open: false, closed: false };
    const seq = ++this.connSeq;
    const update = this.update;
    this.conn = c;
    this.taken = 0;
    let got = 0;
    return new Promise<number>((resolve, reject) => {
      let fatal: StreamError | undefined;
      ws.onopen = () => {
        if (this.ended) {
          ws.close(1000); // closed while connecting
          return;
        }
        const open: Frame = { type: "open", id: `o${seq}` };
        if (this.target.stream === "durable") {
          open.stream = "durable";
          open.queue_id = this.target.queueId;
        } else {
          open.stream = "non_durable";
          if (this.token !== undefined) open.reconnect_token = this.token;
          if (update && this.token !== undefined) {
            open.previous_filter_groups = this.filters ?? [];
            open.filter_groups = update.groups;
          } else if (this.token === undefined && this.filters !== undefined) open.filter_groups = this.filters;
        }
        this.send(c, open);
      };
      ws.onmessage = (m: MessageEvent) => {
        let f: Frame;
        try {
          f = JSON.parse(String(m.data)) as Frame;
        } catch {
          return;
        }
        switch (f.type) {
          case "connected":
            c.open = true;
            if (typeof f.reconnect_token === "string") {
              this.token = f.reconnect_token;
              this.o.onReconnectToken?.(f.reconnect_token);
            }
            if (update && this.update === update) {
              this.filters = update.groups;
              this.update = undefined;
              update.resolve();
            }
            this.send(c, { type: "demand", n: this.credit });
            break;
          case "event": {
            const d = this.delivery(c, f);
            if (this.applyCarried(c, d)) break;
            got++;
            this.buffer.push(d);
            this.wake();
            break;
          }
          case "settled": {
            const p = this.pending.get(String(f.id));
            if (p) {
              this.pending.delete(String(f.id));
              p.resolve(Number(f.acked) > 0 ? "acked" : Number(f.nacked) > 0 ? "nacked" : "skipped");
            }
            break;
          }
          case "idle": // the API Gateway bridge keeps no credit: ask again later
            setTimeout(() => {
              if (!c.closed) this.send(c, { type: "demand", n: Math.max(1, Math.min(1000, Number(f.unmet) || this.credit)) });
            }, 1000);
            break;
          case "error": {
            const err = new StreamError(Number(f.status_code), String(f.message ?? ""), String(f.code ?? ""));
            if (f.fatal === true) {
              fatal = err;
              break;
            }
            const p = f.id === undefined ? undefined : this.pending.get(String(f.id));
            if (p) {
              this.pending.delete(String(f.id));
              p.reject(err);
            }
            break;
          }
        }
      };
      ws.onclose = (ev: CloseEvent) => {
        c.closed = true;
        this.orphan(c);
        if (this.ended) return resolve(got);
        if (fatal !== undefined && update && this.update === update && (fatal.statusCode === 403 || fatal.statusCode === 422)) {
          this.update = undefined;
          update.reject(fatal);
          return resolve(got);
        }
        if (fatal !== undefined) {
          if (fatal.statusCode === 500 && fatal.message.includes(BROKER_CANCELLED.slice(0, 40))) return resolve(got);
          if (fatal.statusCode === 404 && this.target.stream === "non_durable" && this.token !== undefined) {
            this.token = undefined;
            this.o.onReset?.(fatal);
            return resolve(got);
          }
          return reject(fatal);
        }
        // 1000 from the server, 1001 going away, 1006 a cut connection,
        // 1011/1012/1013 server trouble: open again. A refused upgrade
        // (401, 403) shows as 1006 too, so it is retried with backoff.
        void ev;
        resolve(got);
      };
      ws.onerror = () => {
        // onclose follows and decides.
      };
    });
  }

  /** The delivery of an event frame, bound to its connection. */
  private delivery(c: Conn, f: Frame): Delivery {
    const tag = Number(f.delivery_tag ?? 0);
    const event = f.event as ConsumerEvent;
    return {
      event,
      deliveryTag: tag,
      deliveryCount: Number(f.delivery_count ?? 1),
      ack: () => this.settle(c, tag, event.id, "ack", undefined),
      nack: (delay?: number) => this.settle(c, tag, event.id, "nack", delay),
    };
  }

  private settle(c: Conn, tag: number, eventId: string | undefined, kind: "ack" | "nack", delay: number | undefined): Promise<Settlement> {
    if (this.target.stream !== "durable") return Promise.reject(new Error("herald client: only a durable stream's events are settled"));
    if (delay !== undefined && (!Number.isInteger(delay) || delay < 0 || delay > 43_200)) {
      return Promise.reject(new Error("herald client: nack delay must be whole seconds from 0 to 43200"));
    }
    if (c.closed) {
      // The event is redelivered on the next connection: settle it there.
      // (A nack without a delay needs nothing: the redelivery is its effect.)
      if (kind === "ack" || delay !== undefined) this.carry(eventId, kind, delay);
      return Promise.resolve("carried");
    }
    return new Promise((resolve, reject) => {
      const id = `s${++this.frameSeq}`;
      this.pending.set(id, { resolve, reject, kind, delay, eventId });
      const f: Frame = { type: kind, id, delivery_tags: [tag] };
      if (delay !== undefined) f.delay = delay;
      this.send(c, f);
    });
  }

  /** Remembers a settlement the connection ended before, by event id; without an id it cannot be matched and is lost (the event comes again). */
  private carry(eventId: string | undefined, kind: "ack" | "nack", delay: number | undefined, waiter?: Pending): void {
    if (eventId === undefined || eventId === "" || (kind === "nack" && delay === undefined)) {
      waiter?.resolve("carried");
      return;
    }
    if (this.carried.size >= MAX_CARRIED) {
      const oldest = this.carried.keys().next().value as string;
      this.carried.delete(oldest);
    }
    this.carried.set(eventId, { kind, delay });
    waiter?.resolve("carried");
  }

  /** Settlements in flight when c ended are carried to the next connection. */
  private orphan(c: Conn): void {
    if (this.conn !== c) return;
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      this.carry(p.eventId, p.kind, p.delay, p);
    }
    // A durable queue's events yielded to nobody yet come again on the
    // next connection; a non-durable queue's were acknowledged when
    // written, so they stay to be yielded.
    if (this.target.stream === "durable") this.buffer.length = 0;
  }

  /** Settles a redelivered event whose settlement was carried; true when it was. */
  private applyCarried(c: Conn, d: Delivery): boolean {
    const id = d.event.id;
    if (id === undefined) return false;
    const s = this.carried.get(id);
    if (s === undefined) return false;
    this.carried.delete(id);
    if (s.kind === "ack") void d.ack().catch(() => {});
    else void d.nack(s.delay).catch(() => {});
    void c;
    return true;
  }

  /**
   * Moves a non-durable queue to new filters: the stream reconnects with
   * its token, the queue's current filters as previous_filter_groups and
   * these as filter_groups (a compare-and-set). Resolves once the stream is
   * open on them; rejects with the StreamError (403, 422) that refused the
   * move, and the stream goes on with the filters it had.
   */
  updateFilters(groups: FilterGroup[]): Promise<void> {
    if (this.target.stream !== "non_durable") return Promise.reject(new Error("herald client: a durable queue's filters change with updateDurableQueueFilters"));
    if (!this.started || this.token === undefined) {
      this.filters = groups;
      return Promise.resolve();
    }
    this.update?.reject(new Error("herald client: superseded by a later updateFilters"));
    return new Promise((resolve, reject) => {
      this.update = { groups, resolve, reject };
      this.conn?.ws.close(1000);
    });
  }
}
