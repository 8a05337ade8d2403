/**
 * A REST answer outside 2xx. `code` and `message` come from Herald's error
 * body (`{"code": "invalid_argument", "message": "…"}`); a body that is not
 * Herald's (a proxy's page) leaves `code` empty and `message` holding its
 * first 200 characters.
 */
export class HeraldError extends Error {
  /** The HTTP status, e.g. 404. */
  readonly status: number;
  /** Herald's error code, e.g. "not_found"; "" when the body was not Herald's. */
  readonly code: string;
  /** The answer's Retry-After in milliseconds (429, 503), 0 when absent. */
  readonly retryAfterMs: number;
  /** The consumer's leased, unacknowledged event count on a pull's 429. */
  readonly inFlight: number | undefined;

  constructor(op: string, status: number, code: string, message: string, retryAfterMs: number, inFlight?: number) {
    super(`herald: ${op}: ${status} ${message}`);
    this.name = "HeraldError";
    this.status = status;
    this.code = code;
    this.retryAfterMs = retryAfterMs;
    this.inFlight = inFlight;
  }
}

/**
 * An open stream's `error` event (SSE) or fatal `error` frame (WebSocket):
 * `statusCode` 404 when the queue is gone, 500 when the broker cancelled
 * the stream's consumer (the stream reconnects on its own then), 403 and
 * 422 for a refused open. Never carries a token.
 */
export class StreamError extends Error {
  /** The HTTP status the failure would have had. */
  readonly statusCode: number;
  /** Herald's error code (WebSocket frames), "" for SSE. */
  readonly code: string;

  constructor(statusCode: number, message: string, code = "") {
    super(`herald stream: ${statusCode} ${message}`);
    this.name = "StreamError";
    this.statusCode = statusCode;
    this.code = code;
  }
}

/** The start of the message of a stream whose broker consumer was cancelled while its queue is intact: reconnect. */
export const BROKER_CANCELLED = "Internal Server Error: The broker cancelled this stream's consumer.";

/** Parses Retry-After: delay-seconds or an HTTP date (RFC 9110, 10.2.3); 0 when absent or unreadable. */
export function parseRetryAfter(v: string | null, now = Date.now()): number {
  if (v == null) return 0;
  v = v.trim();
  if (v === "") return 0;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? 0 : Math.max(0, t - now);
}

/** Builds the HeraldError of a non-2xx answer. */
export async function errorFrom(op: string, res: Response): Promise<HeraldError> {
  const text = await res.text().catch(() => "");
  let code = "";
  let message = "";
  let inFlight: number | undefined;
  try {
    const b = JSON.parse(text) as { code?: unknown; message?: unknown; in_flight?: unknown };
    if (typeof b.code === "string") code = b.code;
    if (typeof b.message === "string") message = b.message;
    if (typeof b.in_flight === "number") inFlight = b.in_flight;
  } catch {
    // not Herald's body
  }
  if (code === "" && message === "") {
    message = text.trim();
    if (message.length > 200) message = message.slice(0, 200) + "…";
  }
  if (message === "") message = res.statusText;
  return new HeraldError(op, res.status, code, message, parseRetryAfter(res.headers.get("Retry-After")), inFlight);
}

/** Says whether a status is one retrying can fix: 429, 502, 503, 504. */
export function retryableStatus(s: number): boolean {
  return s === 429 || s === 502 || s === 503 || s === 504;
}

/** The HTTP status of a REST or stream error, 0 for anything else. */
export function statusOf(err: unknown): number {
  if (err instanceof HeraldError) return err.status;
  if (err instanceof StreamError) return err.statusCode;
  return 0;
}
