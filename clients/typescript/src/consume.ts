import type { HeraldClient } from "./client.js";
import { MAX_PULL_LIMIT, MAX_RETRY_AFTER_SECONDS, MAX_VISIBILITY_SECONDS } from "./client.js";
import { HeraldError, retryableStatus } from "./errors.js";
import type { AckStatus, Lease } from "./types.js";
import { anySignal, backoffCeiling, jitter, sleep } from "./util.js";

/** The reason of a handler's signal when the lease's life ran out (maxExtensionMs reached, or extensions failed until its expiry). */
export class LeaseExpiredError extends Error {
  constructor() {
    super("herald client: the lease expired");
    this.name = "LeaseExpiredError";
  }
}

/** The reason of a handler's signal when an extension answered stale: the lease is no longer this worker's, and its acknowledgement will be stale too. */
export class LeaseLostError extends Error {
  constructor() {
    super("herald client: the lease is no longer this worker's");
    this.name = "LeaseLostError";
  }
}

/**
 * A handler error that says how a batch failed. Any other error counts as
 * a Rejection without options: the batch is acknowledged `failed` and
 * redelivered as the consumer's retry policy says.
 */
export class Rejection extends Error {
  /** Delays the redelivery: acknowledged failed with retryAfter, rounded up to whole seconds, at most 12 h. */
  readonly retryAfterMs: number;
  /** Gives up on the batch: acknowledged rejected, its events go to the dead-letter queue at once. Wins over retryAfterMs. */
  readonly deadLetter: boolean;

  constructor(message: string, opts: { retryAfterMs?: number; deadLetter?: boolean; cause?: unknown } = {}) {
    super(message, { cause: opts.cause });
    this.name = "Rejection";
    this.retryAfterMs = opts.retryAfterMs ?? 0;
    this.deadLetter = opts.deadLetter ?? false;
  }
}

/** What a handler gets besides the lease. */
export interface HandlerContext {
  /**
   * Aborts when the lease is gone: its reason is a LeaseExpiredError or a
   * LeaseLostError. It does NOT abort when consume is asked to stop, so the
   * batch in hand is finished and acknowledged.
   */
  signal: AbortSignal;
  /** The worker's id, as sent with every pull. */
  workerId: string;
}

/** Processes one leased batch: returning acknowledges it ok (committed), throwing acknowledges it failed or rejected (see Rejection). */
export type Handler = (lease: Lease, ctx: HandlerContext) => Promise<void> | void;

/** A problem consume recovered from or that stopped it, for logging. */
export interface ConsumeNotice {
  worker: string;
  /** "pull", "extend", "acknowledge", "handler" or "stale". */
  op: string;
  message: string;
  leaseId?: string;
  error?: unknown;
}

/** The options of consume. Absent fields take the defaults given. */
export interface ConsumeOptions {
  /** Stops the workers gracefully: each finishes and acknowledges the batch it holds, and none pulls again. */
  signal?: AbortSignal;
  /** How many pull loops run at once (default 1); each has the workerId workerPrefix + "-" + its index. */
  workers?: number;
  /** Names the workers (default "herald-" and 8 random hex digits). A stable prefix lets a restarted process take back its leases. */
  workerPrefix?: string;
  /** The most events per batch, 1–100 (default 20). */
  limit?: number;
  /** Each lease's visibility timeout, whole seconds 1–600 (default 60), and what each extension asks for. */
  visibilitySeconds?: number;
  /**
   * How long a handler may keep a lease, from its hand-out, in ms (default
   * one hour, at most 12 h). While the handler runs, its lease is extended
   * when half of the visibility is left, each time by the visibility, the
   * last time just up to this. Negative: never extend.
   */
  maxExtensionMs?: number;
  /** The first wait after a pull that found nothing (204) or a paused consumer (409), doubling up to maxIdleBackoffMs; defaults 250 and 5000 ms, jittered. */
  idleBackoffMs?: number;
  maxIdleBackoffMs?: number;
  /** Bounds the acknowledgement of a batch with its retries, sent even after the stop signal (default 30,000 ms). */
  ackTimeoutMs?: number;
  /** Receives failed handlers, stale acknowledgements and errors consume recovers from. */
  onNotice?: (n: ConsumeNotice) => void;
}

const MAX_LEASE_LIFE_MS = 12 * 3600_000;

/**
 * Runs pull workers on the durable consumer destinationId until the signal
 * aborts or an error retrying cannot fix (the consumer deleted, a token
 * refused), with the contract of the Go client's Consume: each worker
 * pulls a batch, runs handler while extending the lease, and acknowledges
 * the batch `ok` (handler returned), `failed` (it threw; with retryAfter
 * for a Rejection with retryAfterMs) or `rejected` (a Rejection with
 * deadLetter). Workers back off with jitter when the consumer is caught up
 * (204) or paused (409), wait for the Retry-After of a full in-flight
 * window (429), and keep going through outages after the client's own
 * retries. An acknowledgement is retried until ackTimeoutMs, idempotently:
 * one whose answer was lost answers as the first did.
 *
 * Resolves after a graceful stop; rejects with the first error that
 * stopped it (the other workers then stop gracefully too).
 */
export async function consume(client: HeraldClient, destinationId: string, handler: Handler, options: ConsumeOptions = {}): Promise<void> {
  const o = withDefaults(options);
  const stop = new AbortController();
  const outer = options.signal;
  const onOuter = () => stop.abort();
  if (outer?.aborted) stop.abort();
  outer?.addEventListener("abort", onOuter, { once: true });
  let fatal: unknown;
  try {
    await Promise.all(
      Array.from({ length: o.workers }, async (_, i) => {
        const w = new Worker(client, destinationId, handler, o, `${o.workerPrefix}-${i}`, stop.signal);
        try {
          await w.run();
        } catch (err) {
          if (fatal === undefined) fatal = err;
          stop.abort();
        }
      }),
    );
  } finally {
    outer?.removeEventListener("abort", onOuter);
  }
  if (fatal !== undefined) throw fatal;
}

type Resolved = Required<Omit<ConsumeOptions, "signal" | "onNotice">> & { onNotice: (n: ConsumeNotice) => void };

function withDefaults(opts: ConsumeOptions): Resolved {
  const rnd = Array.from(crypto.getRandomValues(new Uint8Array(4)), (b) => b.toString(16).padStart(2, "0")).join("");
  const o: Resolved = {
    workers: opts.workers ?? 1,
    workerPrefix: opts.workerPrefix || `herald-${rnd}`,
    limit: opts.limit ?? 20,
    visibilitySeconds: opts.visibilitySeconds ?? 60,
    maxExtensionMs: opts.maxExtensionMs === undefined || opts.maxExtensionMs === 0 ? 3600_000 : opts.maxExtensionMs,
    idleBackoffMs: opts.idleBackoffMs ?? 250,
    maxIdleBackoffMs: opts.maxIdleBackoffMs ?? 5000,
    ackTimeoutMs: opts.ackTimeoutMs ?? 30_000,
    onNotice: opts.onNotice ?? (() => {}),
  };
  if (!Number.isInteger(o.workers) || o.workers < 1) throw new Error("herald client: workers must be a positive integer");
  if (!Number.isInteger(o.limit) || o.limit < 1 || o.limit > MAX_PULL_LIMIT) throw new Error(`herald client: limit must be 1-${MAX_PULL_LIMIT}`);
  if (!Number.isInteger(o.visibilitySeconds) || o.visibilitySeconds < 1 || o.visibilitySeconds > MAX_VISIBILITY_SECONDS) {
    throw new Error(`herald client: visibilitySeconds must be whole seconds from 1 to ${MAX_VISIBILITY_SECONDS}`);
  }
  if (o.maxExtensionMs > MAX_LEASE_LIFE_MS) throw new Error("herald client: maxExtensionMs must be at most 12 hours");
  if (o.workerPrefix.length + 1 + String(o.workers).length > 200) throw new Error("herald client: workerPrefix is too long: a workerId has at most 200 characters");
  if (o.idleBackoffMs < 0 || o.maxIdleBackoffMs < o.idleBackoffMs || o.ackTimeoutMs <= 0) {
    throw new Error("herald client: backoffs must be positive, maxIdleBackoffMs at least idleBackoffMs");
  }
  return o;
}

/** One pull loop of consume. */
class Worker {
  constructor(
    private readonly c: HeraldClient,
    private readonly dest: string,
    private readonly h: Handler,
    private readonly o: Resolved,
    private readonly id: string,
    private readonly stop: AbortSignal,
  ) {}

  /** Pulls and handles until the stop signal (resolves) or a fatal error (rejects). */
  async run(): Promise<void> {
    let idle = 0; // consecutive pulls that found nothing to do
    while (!this.stop.aborted) {
      let lease: Lease | null;
      try {
        lease = await this.c.pull(this.dest, { limit: this.o.limit, visibilitySeconds: this.o.visibilitySeconds, workerId: this.id, signal: this.stop });
      } catch (err) {
        if (this.stop.aborted) return;
        const wait = this.classify("pull", err); // throws when fatal
        idle++;
        await sleep(Math.max(wait, jitter(backoffCeiling(this.o.idleBackoffMs, this.o.maxIdleBackoffMs, idle))), this.stop);
        continue;
      }
      if (lease === null) {
        idle++;
        await sleep(jitter(backoffCeiling(this.o.idleBackoffMs, this.o.maxIdleBackoffMs, idle)), this.stop);
        continue;
      }
      idle = 0;
      await this.handle(lease);
    }
  }

  /** The wait after a failure a worker outlasts (paused, window full, outages); throws the fatal ones. */
  private classify(op: string, err: unknown): number {
    if (err instanceof HeraldError) {
      if (err.status === 409) return 0; // paused
      if (retryableStatus(err.status)) {
        if (err.status !== 429) this.o.onNotice({ worker: this.id, op, message: `${op} failed; going on`, error: err });
        return err.retryAfterMs;
      }
      throw err;
    }
    if (err instanceof SyntaxError) throw err;
    // A transport failure that outlasted the client's retries.
    this.o.onNotice({ worker: this.id, op, message: `${op} failed; going on`, error: err });
    return 0;
  }

  /** Runs the handler on lease, keeping it, and acknowledges it; throws only when consume must stop. */
  private async handle(lease: Lease): Promise<void> {
    // ExpiresAt is on Herald's clock: a skewed local clock falls back to
    // the visibility asked for. From here on the keeper works on the
    // local clock, so skew does not matter after the pull.
    const vis = this.o.visibilitySeconds * 1000;
    const start = Date.now();
    let remaining = Date.parse(lease.expiresAt) - start;
    if (!(remaining > 0) || remaining > vis) remaining = vis;
    const expiry = start + remaining;
    const limit = this.o.maxExtensionMs > 0 ? Math.max(expiry, start + this.o.maxExtensionMs) : expiry;

    const lost = new AbortController(); // the handler's signal
    const limitTimer = setTimeout(() => lost.abort(new LeaseExpiredError()), limit - start);
    const done = new AbortController(); // aborted when the handler returns
    const keeper = this.keep(lease, expiry, limit, done.signal, lost);
    let herr: unknown;
    let failed = false;
    try {
      await this.h(lease, { signal: lost.signal, workerId: this.id });
    } catch (err) {
      herr = err;
      failed = true;
    }
    done.abort();
    clearTimeout(limitTimer);
    await keeper;

    let status: AckStatus = "ok";
    let retryAfterSeconds: number | undefined;
    if (failed) {
      const rej = herr instanceof Rejection ? herr : undefined;
      if (rej?.deadLetter) status = "rejected";
      else {
        status = "failed";
        if (rej && rej.retryAfterMs > 0) retryAfterSeconds = Math.min(Math.ceil(rej.retryAfterMs / 1000), MAX_RETRY_AFTER_SECONDS);
      }
      this.o.onNotice({ worker: this.id, op: "handler", message: `handler failed; batch acknowledged ${status}`, leaseId: lease.leaseId, error: herr });
    }
    // The acknowledgement is sent even after the stop signal, within its
    // own bound, and retried by the client (idempotently: a retry of an
    // applied acknowledgement answers as the first did).
    try {
      const res = await this.c.acknowledge(this.dest, lease, status, { retryAfterSeconds, signal: AbortSignal.timeout(this.o.ackTimeoutMs) });
      if (res.status === "stale") {
        this.o.onNotice({ worker: this.id, op: "stale", message: "acknowledgement was stale: the lease had expired and was handed out again", leaseId: lease.leaseId });
      }
    } catch (err) {
      this.classify("acknowledge", err); // throws when fatal
      // Not acknowledged: Herald redelivers the lease when it expires.
      this.o.onNotice({ worker: this.id, op: "acknowledge", message: "acknowledge failed; the lease will be redelivered", leaseId: lease.leaseId, error: err });
    }
  }

  /**
   * Extends lease while the handler runs (until done aborts): each time
   * half of the visibility is left before expiry (local clock), by the
   * visibility, the last time only up to limit. A stale answer aborts the
   * handler's signal with LeaseLostError; failed extensions are retried
   * until the lease expires (LeaseExpiredError). A 4xx other than 429
   * stops extending: the lease lasts until its current expiry.
   */
  private async keep(lease: Lease, expiry: number, limit: number, done: AbortSignal, lost: AbortController): Promise<void> {
    const vis = this.o.visibilitySeconds * 1000;
    let next = expiry - vis / 2;
    while (expiry < limit) {
      if (!(await sleep(next - Date.now(), done))) return;
      const now = Date.now();
      if (now >= expiry) {
        lost.abort(new LeaseExpiredError());
        return;
      }
      // Whole seconds, rounded up, so the lease reaches limit.
      const v = Math.min(this.o.visibilitySeconds, Math.max(1, Math.ceil((limit - now) / 1000)));
      try {
        const res = await this.c.extend(this.dest, lease, v, { signal: anySignal([AbortSignal.timeout(Math.max(1, expiry - now)), done]) });
        if (res.status === "stale") {
          this.o.onNotice({ worker: this.id, op: "extend", message: "the lease was lost: extend answered stale", leaseId: lease.leaseId });
          lost.abort(new LeaseLostError());
          return;
        }
        expiry = now + v * 1000;
        next = expiry - vis / 2;
      } catch (err) {
        if (done.aborted) return; // the handler returned while extending
        if (err instanceof HeraldError && err.status >= 400 && err.status < 500 && err.status !== 429) {
          this.o.onNotice({ worker: this.id, op: "extend", message: "extend refused; the lease is kept until it expires", leaseId: lease.leaseId, error: err });
          return;
        }
        this.o.onNotice({ worker: this.id, op: "extend", message: "extend failed; retrying", leaseId: lease.leaseId, error: err });
        next = Date.now() + Math.min((expiry - Date.now()) / 2, 1000);
      }
    }
  }
}
