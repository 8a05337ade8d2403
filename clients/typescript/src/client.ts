import { errorFrom, HeraldError, retryableStatus } from "./errors.js";
import type {
  AckStatus,
  AcknowledgeResponse,
  CreateDestinationRequest,
  CreateDurableQueueRequest,
  DeadLetterPage,
  Destination,
  DurableQueue,
  ExtendResponse,
  FilterGroup,
  Lease,
  PublishEvent,
  PublishResult,
} from "./types.js";
import type { components } from "./openapi.js";
import { anySignal, backoffCeiling, isAbort, jitter, randomUUID, sleep } from "./util.js";

type Schemas = components["schemas"];

/**
 * Where the bearer token comes from: a string, or a function asked before
 * every REST call and every stream (re)connect, so that tokens that expire
 * (OIDC JWTs) are refreshed by it. It may return a promise.
 */
export type TokenProvider = string | (() => string | Promise<string>);

/** How REST calls are retried: transport failures and 429, 502, 503, 504 (and 409 on a keyed publish). */
export interface RetryPolicy {
  /** The most attempts of one call, the first included; 1 turns retries off (default 4). */
  maxAttempts: number;
  /** The ceiling of the first wait in ms; each later one doubles, up to maxBackoffMs (default 200). Waits are drawn below the ceiling ("full jitter"). */
  initialBackoffMs: number;
  /** Caps the ceiling (default 5000). */
  maxBackoffMs: number;
  /** Caps how long a server's Retry-After is honoured (default 60,000; 0: no cap). */
  maxRetryAfterMs: number;
}

/** 4 attempts, waits drawn below 200, 400, 800 ms, Retry-After honoured up to a minute (as the Go client's). */
export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxAttempts: 4,
  initialBackoffMs: 200,
  maxBackoffMs: 5000,
  maxRetryAfterMs: 60_000,
};

/** The options of `new HeraldClient`. */
export interface ClientOptions {
  /** Scheme, host and an optional path prefix, e.g. "http://127.0.0.1:8080"; no query or fragment. */
  baseUrl: string;
  /** The bearer token (omit for none). */
  token?: TokenProvider;
  /** Bounds each attempt of a REST call in ms (default 30,000, above the longest wait of a pull at the broker). */
  timeoutMs?: number;
  /** Replaces the retry policy (fields left out keep the defaults). */
  retry?: Partial<RetryPolicy>;
  /** The fetch to call (default: the platform's). */
  fetch?: typeof fetch;
  /**
   * Whether publish and publishBatch send a random Idempotency-Key of
   * their own (default true; see PublishOptions). False sends none, so a
   * retry after a lost answer can publish twice; keys passed as
   * `idempotencyKey` are still sent.
   */
  idempotencyKeys?: boolean;
}

/** Options every call takes: a signal that cancels it, retries included. */
export interface CallOptions {
  signal?: AbortSignal;
}

/**
 * The options of publish and publishBatch. Every call sends an
 * Idempotency-Key (docs/api.md, "Idempotency keys"): a random UUID made
 * for the call and kept across its retries, so that a retry after a lost
 * answer (a timeout, a cut connection, a 502) answers the first attempt's
 * result, with `replayed` true, instead of publishing the event twice.
 *
 * Events may instead carry keys of their own (PublishEvent's
 * `idempotency_key`, the same 1–200 printable ASCII characters). Those
 * win: a call whose event (publish) or any of whose events (publishBatch)
 * has one sends no Idempotency-Key header, since Herald refuses a request
 * with both (400). In such a batch every event without a key gets a
 * random one of its own, kept across retries (none when the client's
 * `idempotencyKeys` is false), so a retried batch still publishes each
 * event once; a repeat of an event's key answers that event's first
 * result with `replayed` true while the batch's other events publish.
 */
export interface PublishOptions extends CallOptions {
  /**
   * The key to send instead (1–200 printable ASCII characters), for a
   * publisher that retries across calls or processes: publishing the same
   * events again with the same key publishes nothing and answers the first
   * results. A publishBatch of more than MAX_BATCH events sends chunk i
   * (from 0) as `${key}/${i}`. Another request under a used key is a
   * HeraldError 422.
   */
  idempotencyKey?: string;
}

/** The longest Idempotency-Key Herald takes, in characters. */
export const MAX_IDEMPOTENCY_KEY = 200;

/** The most events one batch publish carries; publishBatch splits longer lists. */
export const MAX_BATCH = 100;
/** Pull limits of the durable-consumer API. */
export const MAX_PULL_LIMIT = 100;
/** Visibility timeouts are whole seconds from 1 to 600. */
export const MAX_VISIBILITY_SECONDS = 600;
/** A failed acknowledgement's retryAfter is at most 43,200 s (12 h). */
export const MAX_RETRY_AFTER_SECONDS = 43_200;

/** A pull's parameters; absent ones take Herald's defaults. */
export interface PullOptions extends CallOptions {
  /** The most events in the batch, 1–100 (default 20). */
  limit?: number;
  /** The lease's visibility timeout, whole seconds 1–600 (default 60). */
  visibilitySeconds?: number;
  /** Names the worker (at most 200 characters); a worker that holds a live lease gets it back. */
  workerId?: string;
}

interface Request {
  method: string;
  path: string;
  query?: Record<string, string | undefined>;
  body?: unknown;
  /** Statuses that are answers for this call, not failures to retry (pull: 429). */
  noRetry?: number[];
  /** Statuses to retry for this call besides the usual ones (a keyed publish: 409, its key in progress). */
  retryAlso?: number[];
  /** Extra request headers (Idempotency-Key). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/**
 * A client of one Herald deployment, for browsers, Node 20+, Deno and Bun:
 * it uses only fetch, ReadableStream, AbortSignal and WebSocket. It makes
 * no call until asked.
 */
export class HeraldClient {
  readonly baseUrl: string;
  /** @internal */ readonly fetch: typeof fetch;
  private readonly token: TokenProvider | undefined;
  private readonly timeoutMs: number;
  private readonly retry: RetryPolicy;
  private readonly idempotencyKeys: boolean;

  constructor(opts: ClientOptions) {
    let u: URL;
    try {
      u = new URL(opts.baseUrl);
    } catch {
      // URL's message quotes the URL, credentials and all.
      throw new Error("herald client: baseUrl does not parse as a URL");
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
      throw new Error("herald client: baseUrl must be http:// or https:// with a host");
    }
    if (u.search !== "" || u.hash !== "" || u.username !== "" || u.password !== "") {
      throw new Error("herald client: baseUrl must have no query, fragment or credentials");
    }
    this.baseUrl = u.toString().replace(/\/+$/, "");
    this.token = opts.token;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.retry = { ...DEFAULT_RETRY_POLICY, ...opts.retry };
    this.idempotencyKeys = opts.idempotencyKeys ?? true;
    const f = opts.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new Error("herald client: no fetch on this platform: pass options.fetch");
    this.fetch = f.bind(globalThis);
    if (!(this.timeoutMs > 0)) throw new Error("herald client: timeoutMs must be positive");
    if (!(this.retry.maxAttempts >= 1)) throw new Error("herald client: retry.maxAttempts must be at least 1");
  }

  /** @internal The current bearer token, "" for none. */
  async bearer(): Promise<string> {
    if (this.token === undefined) return "";
    return typeof this.token === "string" ? this.token : await this.token();
  }

  /** @internal The URL of path below the base URL with query. */
  url(path: string, query?: Record<string, string | undefined>): string {
    const u = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, v);
    return u.toString();
  }

  /** @internal Headers of a call: Authorization when there is a token. */
  async headers(extra?: Record<string, string>): Promise<Headers> {
    const h = new Headers(extra);
    const t = await this.bearer();
    if (t !== "") h.set("Authorization", `Bearer ${t}`);
    return h;
  }

  /**
   * Runs req with retries and returns the status and the decoded 2xx
   * answer (undefined without a body). A non-2xx answer is a HeraldError;
   * a wait before a retry that the caller's signal ends is not begun.
   */
  private async request<T>(req: Request): Promise<{ status: number; body: T | undefined }> {
    const op = `${req.method} ${req.path}`;
    const body = req.body === undefined ? undefined : JSON.stringify(req.body);
    for (let attempt = 1; ; attempt++) {
      let retryAfter = 0;
      let last: unknown;
      try {
        return await this.once<T>(op, req, body);
      } catch (err) {
        last = err;
        if (req.signal?.aborted) throw err;
        if (err instanceof HeraldError) {
          const retryable = retryableStatus(err.status) || req.retryAlso?.includes(err.status) === true;
          if (req.noRetry?.includes(err.status) || !retryable) throw err;
          retryAfter = err.retryAfterMs;
        } else if (err instanceof SyntaxError) {
          throw err; // a 2xx answer that is not JSON: not a failure retrying fixes
        }
        // Anything else is a transport failure or a timed-out attempt.
      }
      if (attempt >= this.retry.maxAttempts) throw last;
      if (this.retry.maxRetryAfterMs > 0) retryAfter = Math.min(retryAfter, this.retry.maxRetryAfterMs);
      const wait = Math.max(jitter(backoffCeiling(this.retry.initialBackoffMs, this.retry.maxBackoffMs, attempt)), retryAfter);
      if (!(await sleep(wait, req.signal))) throw last;
    }
  }

  private async once<T>(op: string, req: Request, body: string | undefined): Promise<{ status: number; body: T | undefined }> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const headers = await this.headers({ ...req.headers, ...(body === undefined ? {} : { "Content-Type": "application/json" }) });
    const res = await this.fetch(this.url(req.path, req.query), {
      method: req.method,
      headers,
      body,
      signal: anySignal([req.signal, timeout]),
    });
    if (!res.ok) throw await errorFrom(op, res);
    const text = await res.text();
    return { status: res.status, body: text === "" ? undefined : (JSON.parse(text) as T) };
  }

  // ---- publishing (the notifications API) ----

  /**
   * The idempotency key of a publish made with opts: the caller's, else a
   * new random UUID; undefined when the client sends none. Throws on a key
   * Herald would refuse, before any request.
   */
  private publishKey(opts: PublishOptions): string | undefined {
    const k = opts.idempotencyKey;
    if (k !== undefined) {
      checkKey(k);
      return k;
    }
    return this.idempotencyKeys ? randomUUID() : undefined;
  }

  /**
   * The events of a publishBatch whose events carry keys of their own
   * (PublishOptions): each event with its key checked, and a random one
   * for an event without (left without when the client sends no keys of
   * its own); undefined when no event has a key, so the call sends a
   * header key instead. Throws before any request on a bad or repeated
   * event key, or on event keys beside opts.idempotencyKey (Herald would
   * answer 400 to either).
   */
  private eventKeys(events: PublishEvent[], opts: PublishOptions): PublishEvent[] | undefined {
    if (!events.some((e) => e.idempotency_key !== undefined)) return undefined;
    if (opts.idempotencyKey !== undefined) throw new Error(bothKeys);
    const seen = new Set<string>();
    return events.map((e, i) => {
      let k = e.idempotency_key;
      if (k === undefined) {
        if (!this.idempotencyKeys) return e;
        k = randomUUID();
      } else {
        checkEventKey(k, i);
      }
      // A repeat is refused whole by Herald within a chunk and fails the
      // later event across chunks: either way a mistake of the caller's.
      if (seen.has(k)) throw new Error(`herald client: events ${events.findIndex((o) => o.idempotency_key === k)} and ${i} carry the same idempotency_key`);
      seen.add(k);
      return k === e.idempotency_key ? e : { ...e, idempotency_key: k };
    });
  }

  /**
   * Publishes one event (POST /api/v1beta/events) under an idempotency key
   * (PublishOptions). An event that breaks a rule is a HeraldError (422);
   * a broker failure is a result with `success` false (safe to publish
   * again). Retries 429/502/503/504, a keyed publish's 409 (its first
   * attempt still running) and transport failures with jitter, honouring
   * Retry-After; each retry carries the same key, so the event is
   * published once. Without keys a retried publish whose first attempt was
   * applied publishes twice: consumers drop duplicates by the event's id.
   */
  async publish(event: PublishEvent, opts: PublishOptions = {}): Promise<PublishResult> {
    let keying: Pick<Request, "headers" | "retryAlso">;
    if (event.idempotency_key !== undefined) {
      // The event's own key is the publish's key (docs/api.md): sent in
      // the body alone, with a keyed publish's retries.
      if (opts.idempotencyKey !== undefined) throw new Error(bothKeys);
      checkEventKey(event.idempotency_key, 0);
      keying = { retryAlso: [409] };
    } else {
      keying = keyed(this.publishKey(opts));
    }
    const r = await this.request<{ result: Schemas["PublishingResult"] }>({ method: "POST", path: "/api/v1beta/events", body: { event }, signal: opts.signal, ...keying });
    return withReplayed(r.body!.result);
  }

  /**
   * Publishes events, MAX_BATCH per call (POST /api/v1beta/events/batch),
   * and returns one result per event, in order: an event that breaks a rule
   * fails alone (`success` false). When a call fails after its retries, the
   * error is thrown with `results` holding the results of the calls before
   * it (PublishBatchError); the events after them were not sent. Each
   * call carries an idempotency key (PublishOptions) kept across its
   * retries: one per publishBatch, with `/${i}` after it for chunk i when
   * there is more than one chunk; or, when any event carries an
   * `idempotency_key`, no header key and a key on every event (a random
   * one for an event without), each event then replayed or published on
   * its own.
   */
  async publishBatch(events: PublishEvent[], opts: PublishOptions = {}): Promise<PublishResult[]> {
    const keyedEvents = this.eventKeys(events, opts);
    if (keyedEvents !== undefined) events = keyedEvents;
    const key = keyedEvents === undefined ? this.publishKey(opts) : undefined;
    const chunked = events.length > MAX_BATCH;
    if (key !== undefined && chunked) checkKey(`${key}/${Math.floor((events.length - 1) / MAX_BATCH)}`);
    const results: PublishResult[] = [];
    for (let start = 0; start < events.length; start += MAX_BATCH) {
      const chunk = events.slice(start, start + MAX_BATCH);
      const chunkKey = key !== undefined && chunked ? `${key}/${start / MAX_BATCH}` : key;
      let out: { results: Schemas["PublishingResult"][] };
      try {
        out = (await this.request<{ results: Schemas["PublishingResult"][] }>({
          method: "POST",
          path: "/api/v1beta/events/batch",
          body: { events: chunk },
          signal: opts.signal,
          ...keyed(chunkKey),
        })).body!;
      } catch (err) {
        throw new PublishBatchError(err, results);
      }
      if (out.results.length !== chunk.length) {
        throw new PublishBatchError(new Error(`herald client: batch publish answered ${out.results.length} results for ${chunk.length} events`), results);
      }
      results.push(...out.results.map(withReplayed));
    }
    return results;
  }

  // ---- destinations and durable queues ----

  /** Creates a durable consumer (POST /v1/event-destinations); it starts at the head of the stream. */
  async createDestination(req: Omit<CreateDestinationRequest, "type"> & { type?: "DURABLE_CONSUMER" }, opts: CallOptions = {}): Promise<Destination> {
    const r = await this.request<Destination>({ method: "POST", path: "/v1/event-destinations", body: { type: "DURABLE_CONSUMER", ...req }, signal: opts.signal });
    return r.body!;
  }

  /** One destination, with its committed cursor and in-flight count (GET /v1/event-destinations/{id}). */
  async getDestination(id: string, opts: CallOptions = {}): Promise<Destination> {
    return (await this.request<Destination>({ method: "GET", path: destPath(id), signal: opts.signal })).body!;
  }

  /** Deletes a destination and its subscription (DELETE /v1/event-destinations/{id}). */
  async deleteDestination(id: string, opts: CallOptions = {}): Promise<void> {
    await this.request({ method: "DELETE", path: destPath(id), signal: opts.signal });
  }

  /** Stops handing out leases (acknowledging and extending still work). */
  async pause(id: string, opts: CallOptions = {}): Promise<void> {
    await this.request({ method: "POST", path: destPath(id, "pause"), signal: opts.signal });
  }

  /** Starts handing out leases again. */
  async resume(id: string, opts: CallOptions = {}): Promise<void> {
    await this.request({ method: "POST", path: destPath(id, "resume"), signal: opts.signal });
  }

  /** Ensures a durable queue exists (POST /api/v1beta/queues/durable): an existing id answers with its own filters and `created` false. */
  async ensureDurableQueue(req: CreateDurableQueueRequest, opts: CallOptions = {}): Promise<DurableQueue> {
    return (await this.request<DurableQueue>({ method: "POST", path: "/api/v1beta/queues/durable", body: req, signal: opts.signal })).body!;
  }

  /**
   * Re-filters a durable queue (PATCH /api/v1beta/queues/durable), a
   * compare-and-set: `current` must be the queue's filters, else a
   * HeraldError 422 and nothing changes. Safe to retry.
   */
  async updateDurableQueueFilters(queueId: string, current: FilterGroup[], next: FilterGroup[], opts: CallOptions = {}): Promise<void> {
    await this.request({
      method: "PATCH",
      path: "/api/v1beta/queues/durable",
      body: { queue_id: queueId, current_filter_groups: current, new_filter_groups: next },
      signal: opts.signal,
    });
  }

  /** Deletes a durable queue and what it holds. */
  async deleteDurableQueue(queueId: string, opts: CallOptions = {}): Promise<void> {
    await this.request({ method: "DELETE", path: "/api/v1beta/queues/durable", query: { queue_id: queueId }, signal: opts.signal });
  }

  /** Lists dead letters (GET /api/v1beta/dead-letters); pass `next_page_token` back as pageToken. */
  async listDeadLetters(o: CallOptions & { limit?: number; pageToken?: string } = {}): Promise<DeadLetterPage> {
    const query = { limit: o.limit?.toString(), page_token: o.pageToken || undefined };
    return (await this.request<DeadLetterPage>({ method: "GET", path: "/api/v1beta/dead-letters", query, signal: o.signal })).body!;
  }

  // ---- the durable-consumer API: pull, acknowledge, extend ----

  /**
   * Leases the next batch (POST /v1/event-destinations/{id}/pull); null
   * when the consumer is caught up (204). A paused consumer (409) and a
   * full in-flight window (429, with retryAfterMs and inFlight) are
   * HeraldErrors, not retried here. A worker that still holds a live lease
   * gets that same lease back.
   */
  async pull(destinationId: string, o: PullOptions = {}): Promise<Lease | null> {
    if (o.visibilitySeconds !== undefined) checkSeconds("visibilitySeconds", o.visibilitySeconds, 1, MAX_VISIBILITY_SECONDS);
    const r = await this.request<Lease>({
      method: "POST",
      path: destPath(destinationId, "pull"),
      query: { limit: o.limit?.toString(), visibility: o.visibilitySeconds?.toString(), workerId: o.workerId || undefined },
      noRetry: [429],
      signal: o.signal,
    });
    return r.status === 204 || r.body === undefined ? null : r.body;
  }

  /**
   * Reports a lease's outcome (POST /v1/event-destinations/{id}/acknowledge):
   * `ok` answers `committed`, `failed` `requeued` (after retryAfterSeconds,
   * or as the retry policy says), `rejected` `dead_lettered`; a lease that
   * is no longer this worker's answers `stale`, not an error. It is retried
   * like every call: a retried acknowledgement whose first attempt was
   * applied answers as the first did (Herald remembers it for at least 10
   * minutes), so retrying never commits twice.
   */
  async acknowledge(
    destinationId: string,
    lease: Pick<Lease, "leaseId" | "generation">,
    status: AckStatus,
    o: CallOptions & { retryAfterSeconds?: number } = {},
  ): Promise<AcknowledgeResponse> {
    const body: Record<string, unknown> = { leaseId: lease.leaseId, generation: lease.generation, status };
    if (o.retryAfterSeconds !== undefined && o.retryAfterSeconds !== 0) {
      if (status !== "failed") throw new Error("herald client: retryAfterSeconds goes only with status failed");
      checkSeconds("retryAfterSeconds", o.retryAfterSeconds, 0, MAX_RETRY_AFTER_SECONDS);
      body.retryAfter = o.retryAfterSeconds;
    }
    return (await this.request<AcknowledgeResponse>({ method: "POST", path: destPath(destinationId, "acknowledge"), body, signal: o.signal })).body!;
  }

  /**
   * Keeps a lease: it now expires visibilitySeconds (1–600) from now
   * (POST /v1/event-destinations/{id}/extend). A stale lease answers
   * `stale`; past the lease's 12-hour life it is a HeraldError (400).
   */
  async extend(destinationId: string, lease: Pick<Lease, "leaseId" | "generation">, visibilitySeconds: number, o: CallOptions = {}): Promise<ExtendResponse> {
    checkSeconds("visibilitySeconds", visibilitySeconds, 1, MAX_VISIBILITY_SECONDS);
    const body = { leaseId: lease.leaseId, generation: lease.generation, visibility: visibilitySeconds };
    return (await this.request<ExtendResponse>({ method: "POST", path: destPath(destinationId, "extend"), body, signal: o.signal })).body!;
  }
}

/** A batch publish that failed part-way: `results` are those of the calls before the failure, `cause` the failure. */
export class PublishBatchError extends Error {
  readonly results: PublishResult[];
  constructor(cause: unknown, results: PublishResult[]) {
    super(`herald client: batch publish failed after ${results.length} results: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "PublishBatchError";
    this.results = results;
  }
}

function destPath(id: string, action?: string): string {
  return `/v1/event-destinations/${encodeURIComponent(id)}${action ? "/" + action : ""}`;
}

/** The headers and retries of a publish sent under key (none when undefined). */
function keyed(key: string | undefined): Pick<Request, "headers" | "retryAlso"> {
  return key === undefined ? {} : { headers: { "Idempotency-Key": key }, retryAlso: [409] };
}

/** r with `replayed` false when Herald left it out (a first answer). */
function withReplayed(r: Schemas["PublishingResult"]): PublishResult {
  return { ...r, replayed: r.replayed === true };
}

/** Throws unless key is 1–200 printable ASCII characters (docs/api.md, "Idempotency keys"); the message does not quote it. */
function checkKey(key: string): void {
  if (key.length < 1 || key.length > MAX_IDEMPOTENCY_KEY || !/^[\x20-\x7e]+$/.test(key)) {
    throw new Error(`herald client: idempotencyKey must be 1 to ${MAX_IDEMPOTENCY_KEY} printable ASCII characters (with "/i" after it per chunk of a batch over ${MAX_BATCH})`);
  }
}

/** Throws unless the key of event i is 1–200 printable ASCII characters; the message does not quote it. */
function checkEventKey(key: unknown, i: number): void {
  if (typeof key !== "string" || key.length < 1 || key.length > MAX_IDEMPOTENCY_KEY || !/^[\x20-\x7e]+$/.test(key)) {
    throw new Error(`herald client: the idempotency_key of event ${i} must be 1 to ${MAX_IDEMPOTENCY_KEY} printable ASCII characters`);
  }
}

/** Herald refuses an event's idempotency_key beside an Idempotency-Key header (400). */
const bothKeys = "herald client: an event's idempotency_key and the call's idempotencyKey cannot both be given: use one or the other";

function checkSeconds(name: string, v: number, min: number, max: number): void {
  if (!Number.isInteger(v) || v < min || v > max) throw new Error(`herald client: ${name} must be whole seconds from ${min} to ${max}`);
}

export { isAbort };
