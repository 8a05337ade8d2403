// The client against a real Herald (`herald serve`, in memory) behind a
// proxy that cuts connections and swallows answers.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { HeraldClient, HeraldError, Rejection, StreamError, type ConsumerEvent, type Delivery, type Lease } from "../src/index.js";
import { Proxy, startHerald, TOKEN, until, type Herald, type Intercept } from "./harness.js";

let herald: Herald;
let proxy: Proxy;
let client: HeraldClient;
let n = 0;
/** A name no other test uses. */
const unique = (p: string) => `${p}-${process.pid}-${++n}`;

before(async () => {
  herald = await startHerald();
  proxy = await new Proxy(herald.url).start();
  // Short backoffs so that retries do not slow the suite; correctness does
  // not depend on them.
  client = new HeraldClient({ baseUrl: proxy.url, token: () => TOKEN, retry: { initialBackoffMs: 20, maxBackoffMs: 200 } });
});

after(async () => {
  await proxy?.stop();
  await herald?.stop();
});

const ev = (type: string, i: number) => ({ event_type: type, message: { i }, resource: { resource_id: `/items/${i}` } });

describe("publish", () => {
  test("one event and a batch, with a result per event", async () => {
    const one = await client.publish(ev("ts.pub", 1));
    assert.equal(one.success, true);
    assert.equal(one.event.event_type, "ts.pub");
    assert.deepEqual(one.event.message, { i: 1 });
    const results = await client.publishBatch([ev("ts.pub", 2), { event_type: "not a type!" }, ev("ts.pub", 3)]);
    assert.deepEqual(results.map((r) => r.success), [true, false, true]);
    assert.match(results[1]!.failure_reason ?? "", /event_type/);
  });

  test("a rule broken by a single event is a HeraldError 422, not retried", async () => {
    const before = proxy.count((s) => s.path === "/api/v1beta/events");
    await assert.rejects(client.publish({ event_type: "not a type!" }), (e: unknown) => e instanceof HeraldError && e.status === 422);
    assert.equal(proxy.count((s) => s.path === "/api/v1beta/events") - before, 1);
  });

  test("a refused token is a HeraldError 401 that does not quote it, from REST and from a stream", async () => {
    const secret = "not-the-token-" + process.pid;
    const bad = new HeraldClient({ baseUrl: proxy.url, token: secret });
    const refused = (e: unknown) => e instanceof HeraldError && e.status === 401 && !e.message.includes(secret);
    await assert.rejects(bad.publish(ev("ts.pub", 9)), refused);
    await assert.rejects(
      (async () => {
        for await (const _ of bad.streamEvents()) void _;
      })(),
      refused,
    );
  });

  test("a 503 is retried after its Retry-After", async () => {
    let refused = 0;
    proxy.intercept = (req, res) => {
      if (req.url === "/api/v1beta/events" && refused === 0) {
        refused++;
        res.writeHead(503, { "Retry-After": "1", "Content-Type": "application/json" });
        res.end(JSON.stringify({ code: "unavailable", message: "overloaded" }));
        return "handled";
      }
      return "pass";
    };
    try {
      const start = proxy.seen.length;
      const r = await client.publish(ev("ts.pub", 4));
      assert.equal(r.success, true);
      const calls = proxy.seen.slice(start).filter((s) => s.path === "/api/v1beta/events");
      assert.equal(calls.length, 2);
      assert.ok(calls[1]!.at - calls[0]!.at >= 950, `retried after ${calls[1]!.at - calls[0]!.at} ms, before the Retry-After`);
    } finally {
      proxy.intercept = () => "pass";
    }
  });
});

describe("idempotency keys", () => {
  const publishes = (start: number, path = "/api/v1beta/events") => proxy.seen.slice(start).filter((s) => s.path === path);
  const keyOf = (s: { headers: Record<string, unknown> }) => s.headers["idempotency-key"] as string | undefined;

  /** A durable consumer of type, made before anything of type is published. */
  async function consumerOf(type: string): Promise<string> {
    return (await client.createDestination({ filter_groups: [{ event_type: type, filters: [] }] })).id;
  }

  /** Leases and commits everything id holds, and deletes it: the count of events delivered. */
  async function drain(id: string): Promise<number> {
    let n = 0;
    for (let l = await client.pull(id, { limit: 100 }); l !== null; l = await client.pull(id, { limit: 100 })) {
      n += l.events.length;
      assert.equal((await client.acknowledge(id, l, "ok")).status, "committed");
    }
    await client.deleteDestination(id);
    return n;
  }

  /** Swallows Herald's answer to the first request to path: Herald applies it, the client never hears. */
  function loseFirstAnswer(path: string): () => number {
    let lost = 0;
    proxy.intercept = (req) => {
      if (req.url === path && lost === 0) {
        lost++;
        return "swallow";
      }
      return "pass";
    };
    return () => lost;
  }

  for (const keys of [true, false]) {
    test(`a publish whose answer is lost is retried and delivers ${keys ? "one event (the same random key)" : "two events (keys off)"}`, async () => {
      const c = keys ? client : new HeraldClient({ baseUrl: proxy.url, token: TOKEN, retry: { initialBackoffMs: 20, maxBackoffMs: 200 }, idempotencyKeys: false });
      const type = unique("ts.idem");
      const id = await consumerOf(type);
      const start = proxy.seen.length;
      const lost = loseFirstAnswer("/api/v1beta/events");
      let r;
      try {
        r = await c.publish(ev(type, 1));
      } finally {
        proxy.intercept = () => "pass";
      }
      assert.equal(lost(), 1);
      assert.equal(r.success, true);
      const calls = publishes(start);
      assert.equal(calls.length, 2, "the lost answer is retried once");
      if (keys) {
        assert.match(keyOf(calls[0]!) ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        assert.equal(keyOf(calls[1]!), keyOf(calls[0]!), "the retry carries the first attempt's key");
        assert.equal(r.replayed, true, "the retry answers the first attempt's result");
      } else {
        assert.equal(keyOf(calls[0]!), undefined);
        assert.equal(r.replayed, false);
      }
      assert.equal(await drain(id), keys ? 1 : 2);
    });
  }

  test("a batch whose answer is lost is retried under its key and delivers each event once", async () => {
    const type = unique("ts.idem-batch");
    const id = await consumerOf(type);
    const start = proxy.seen.length;
    const lost = loseFirstAnswer("/api/v1beta/events/batch");
    let results;
    try {
      results = await client.publishBatch([ev(type, 1), ev(type, 2), ev(type, 3)]);
    } finally {
      proxy.intercept = () => "pass";
    }
    assert.equal(lost(), 1);
    assert.deepEqual(results.map((r) => [r.success, r.replayed]), [[true, true], [true, true], [true, true]]);
    const calls = publishes(start, "/api/v1beta/events/batch");
    assert.equal(calls.length, 2);
    assert.equal(keyOf(calls[1]!), keyOf(calls[0]!));
    assert.equal(await drain(id), 3);
  });

  test("a 409 (the key's first publish in progress) is retried after its Retry-After with the same key", async () => {
    const type = unique("ts.idem-409");
    const id = await consumerOf(type);
    let refused = 0;
    proxy.intercept = (req, res) => {
      if (req.url === "/api/v1beta/events" && refused === 0) {
        refused++;
        res.writeHead(409, { "Retry-After": "1", "Content-Type": "application/json" });
        res.end(JSON.stringify({ code: "aborted", message: "a publish with this idempotency key is in progress" }));
        return "handled";
      }
      return "pass";
    };
    const start = proxy.seen.length;
    let r;
    try {
      r = await client.publish(ev(type, 1));
    } finally {
      proxy.intercept = () => "pass";
    }
    assert.equal(r.success, true);
    const calls = publishes(start);
    assert.equal(calls.length, 2);
    assert.equal(keyOf(calls[1]!), keyOf(calls[0]!));
    assert.ok(calls[1]!.at - calls[0]!.at >= 950, `retried after ${calls[1]!.at - calls[0]!.at} ms, before the Retry-After`);
    assert.equal(await drain(id), 1);
  });

  test("a 409 without a key is an answer, not retried", async () => {
    const plain = new HeraldClient({ baseUrl: proxy.url, token: TOKEN, idempotencyKeys: false });
    proxy.intercept = (req, res) => {
      if (req.url !== "/api/v1beta/events") return "pass";
      res.writeHead(409, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ code: "aborted", message: "conflict" }));
      return "handled";
    };
    const start = proxy.seen.length;
    try {
      await assert.rejects(plain.publish(ev("ts.idem", 1)), (e: unknown) => e instanceof HeraldError && e.status === 409);
    } finally {
      proxy.intercept = () => "pass";
    }
    assert.equal(publishes(start).length, 1);
  });

  test("the caller's own key: a repeat across calls is replayed, another event under it is a 422", async () => {
    const type = unique("ts.idem-own");
    const id = await consumerOf(type);
    const key = unique("order-42");
    const start = proxy.seen.length;
    const first = await client.publish(ev(type, 1), { idempotencyKey: key });
    const again = await client.publish(ev(type, 1), { idempotencyKey: key });
    assert.equal(first.replayed, false);
    assert.equal(again.replayed, true);
    assert.deepEqual(again.event, first.event, "the first result, occurred_at and all");
    assert.deepEqual(publishes(start).map(keyOf), [key, key]);
    await assert.rejects(client.publish(ev(type, 2), { idempotencyKey: key }), (e: unknown) => e instanceof HeraldError && e.status === 422);
    // Keys off still sends a key the caller passes.
    const plain = new HeraldClient({ baseUrl: proxy.url, token: TOKEN, idempotencyKeys: false });
    assert.equal((await plain.publish(ev(type, 1), { idempotencyKey: key })).replayed, true);
    assert.equal(await drain(id), 1);
  });

  test("per-event keys: no header key, a repeat of the batch answers every event as a replay and publishes nothing", async () => {
    const type = unique("ts.idem-each");
    const id = await consumerOf(type);
    const keys = [unique("order-1"), unique("order-2"), unique("order-3")];
    const batch = () => keys.map((k, i) => ({ ...ev(type, i), idempotency_key: k }));
    const start = proxy.seen.length;
    const first = await client.publishBatch(batch());
    const again = await client.publishBatch(batch());
    assert.deepEqual(first.map((r) => [r.success, r.replayed]), [[true, false], [true, false], [true, false]]);
    assert.deepEqual(again.map((r) => [r.success, r.replayed]), [[true, true], [true, true], [true, true]]);
    assert.deepEqual(again.map((r) => r.event), first.map((r) => r.event), "the first results, occurred_at and all");
    const calls = publishes(start, "/api/v1beta/events/batch");
    assert.deepEqual(calls.map(keyOf), [undefined, undefined], "per-event keys win over the default header key");
    assert.equal(await drain(id), 3, "each event published once");
  });

  test("per-event keys in a mixed batch: the keyless event gets a random key of its own, kept across a retry", async () => {
    const type = unique("ts.idem-mixed");
    const id = await consumerOf(type);
    const start = proxy.seen.length;
    const lost = loseFirstAnswer("/api/v1beta/events/batch");
    let results;
    try {
      results = await client.publishBatch([{ ...ev(type, 1), idempotency_key: unique("mixed") }, ev(type, 2)]);
    } finally {
      proxy.intercept = () => "pass";
    }
    assert.equal(lost(), 1);
    assert.deepEqual(results.map((r) => [r.success, r.replayed]), [[true, true], [true, true]]);
    const calls = publishes(start, "/api/v1beta/events/batch");
    assert.equal(calls.length, 2);
    assert.deepEqual(calls.map(keyOf), [undefined, undefined]);
    assert.equal(await drain(id), 2, "the retry published neither event again");
  });

  test("per-event keys are checked before any request: bad, repeated, or beside the call's key", async () => {
    const before = proxy.seen.length;
    const k = unique("dup");
    await assert.rejects(client.publishBatch([{ ...ev("ts.idem", 1), idempotency_key: "é" }]), /idempotency_key of event 0 must be 1 to 200 printable ASCII/);
    await assert.rejects(client.publishBatch([ev("ts.idem", 0), { ...ev("ts.idem", 1), idempotency_key: "" }]), /idempotency_key of event 1/);
    await assert.rejects(client.publishBatch([{ ...ev("ts.idem", 1), idempotency_key: k }, { ...ev("ts.idem", 2), idempotency_key: k }]), /events 0 and 1 carry the same idempotency_key/);
    await assert.rejects(client.publishBatch([{ ...ev("ts.idem", 1), idempotency_key: k }], { idempotencyKey: k }), /cannot both be given/);
    await assert.rejects(client.publish({ ...ev("ts.idem", 1), idempotency_key: k }, { idempotencyKey: k }), /cannot both be given/);
    assert.equal(proxy.seen.length, before, "no request sent");
  });

  test("a single publish with the event's own key sends no header and is replayed on a repeat", async () => {
    const type = unique("ts.idem-own-event");
    const id = await consumerOf(type);
    const e = { ...ev(type, 1), idempotency_key: unique("single") };
    const start = proxy.seen.length;
    assert.equal((await client.publish(e)).replayed, false);
    assert.equal((await client.publish(e)).replayed, true);
    assert.deepEqual(publishes(start).map(keyOf), [undefined, undefined]);
    assert.equal(await drain(id), 1);
  });

  test("a batch over MAX_BATCH keys its chunks key/0, key/1; a bad key is refused before any request", async () => {
    const type = unique("ts.idem-chunks");
    const key = unique("batch");
    const start = proxy.seen.length;
    const results = await client.publishBatch(Array.from({ length: 101 }, (_, i) => ev(type, i)), { idempotencyKey: key });
    assert.equal(results.length, 101);
    assert.deepEqual(publishes(start, "/api/v1beta/events/batch").map(keyOf), [`${key}/0`, `${key}/1`]);
    const before = proxy.seen.length;
    for (const bad of ["", "é", "x".repeat(201), "tab\tin"]) {
      await assert.rejects(client.publish(ev(type, 1), { idempotencyKey: bad }), /idempotencyKey must be 1 to 200 printable ASCII/);
    }
    await assert.rejects(client.publishBatch(Array.from({ length: 101 }, (_, i) => ev(type, i)), { idempotencyKey: "x".repeat(199) }), /printable ASCII/);
    assert.equal(proxy.seen.length, before, "no request sent");
  });
});

describe("consume", () => {
  async function consumer(type: string): Promise<string> {
    const d = await client.createDestination({ filter_groups: [{ event_type: type, filters: [] }] });
    return d.id;
  }

  test("drains a durable consumer through a lost acknowledgement: nothing lost, nothing committed twice", async () => {
    const type = unique("ts.drain");
    const id = await consumer(type);
    await client.publishBatch(Array.from({ length: 30 }, (_, i) => ev(type, i)));
    let swallowed = 0;
    proxy.intercept = (req) => {
      if (req.url === `/v1/event-destinations/${id}/acknowledge` && swallowed === 0) {
        swallowed++;
        return "swallow"; // Herald commits; the worker never hears it
      }
      return "pass";
    };
    const seen: string[] = [];
    const stop = new AbortController();
    try {
      const done = client.consume(
        id,
        (l: Lease) => {
          for (const e of l.events) seen.push(e.sequence);
          if (seen.length >= 30) stop.abort();
        },
        { limit: 5, signal: stop.signal, idleBackoffMs: 10, maxIdleBackoffMs: 50 },
      );
      await done;
    } finally {
      proxy.intercept = () => "pass";
    }
    assert.equal(swallowed, 1);
    assert.equal(seen.length, 30, "every event handled once");
    assert.equal(new Set(seen).size, 30, "no event handled twice");
    const acks = proxy.count((s) => s.path === `/v1/event-destinations/${id}/acknowledge`);
    assert.equal(acks, 7, "6 batches, one acknowledgement retried");
    const d = await client.getDestination(id);
    assert.equal(d.committed, seen[29]);
    assert.equal(d.in_flight, 0);
    await client.deleteDestination(id);
  });

  test("a full in-flight window (429) is waited out for its Retry-After", async () => {
    const type = unique("ts.429");
    const id = await consumer(type);
    await client.publish(ev(type, 1));
    let refused = 0;
    proxy.intercept = (req, res) => {
      if (req.url?.startsWith(`/v1/event-destinations/${id}/pull`) && refused === 0) {
        refused++;
        res.writeHead(429, { "Retry-After": "1", "Content-Type": "application/json" });
        res.end(JSON.stringify({ code: "resource_exhausted", message: "window full", in_flight: 1000 }));
        return "handled";
      }
      return "pass";
    };
    const stop = new AbortController();
    const start = proxy.seen.length;
    try {
      await client.consume(id, () => stop.abort(), { signal: stop.signal, idleBackoffMs: 1, maxIdleBackoffMs: 2 });
    } finally {
      proxy.intercept = () => "pass";
    }
    const pulls = proxy.seen.slice(start).filter((s) => s.path.startsWith(`/v1/event-destinations/${id}/pull`));
    assert.equal(pulls.length, 2, "the 429 is not retried by the client, and the worker pulls once after it");
    assert.ok(pulls[1]!.at - pulls[0]!.at >= 950, `pulled again after ${pulls[1]!.at - pulls[0]!.at} ms`);
    assert.equal((await client.getDestination(id)).in_flight, 0);
    await client.deleteDestination(id);
  });

  test("the lease is extended while the handler runs, and a stop does not lose the batch in hand", async () => {
    const type = unique("ts.extend");
    const id = await consumer(type);
    await client.publish(ev(type, 1));
    const stop = new AbortController();
    let handlerSignal: AbortSignal | undefined;
    let extendsSeen = 0;
    const notices: string[] = [];
    await client.consume(
      id,
      async (_l, ctx) => {
        handlerSignal = ctx.signal;
        stop.abort(); // asked to stop while the batch is in hand
        // Outlive the 4 s visibility: only extensions keep the lease (at 2 s and 4 s).
        await until(() => proxy.count((s) => s.path === `/v1/event-destinations/${id}/extend`) >= 2, "two extensions");
        extendsSeen = proxy.count((s) => s.path === `/v1/event-destinations/${id}/extend`);
      },
      { signal: stop.signal, visibilitySeconds: 4, onNotice: (x) => notices.push(x.message) },
    );
    assert.ok(extendsSeen >= 2);
    assert.equal(handlerSignal?.aborted, false, "the stop does not abort the handler");
    assert.deepEqual(notices, [], "no stale acknowledgement, no failed extension");
    const d = await client.getDestination(id);
    assert.equal(d.in_flight, 0);
    assert.notEqual(d.committed, "001.00000000000000000000");
    await client.deleteDestination(id);
  });

  test("a Rejection with deadLetter sends the batch to the dead-letter queue", async () => {
    const type = unique("ts.reject");
    const id = await consumer(type);
    await client.publish(ev(type, 7));
    const stop = new AbortController();
    await client.consume(
      id,
      () => {
        stop.abort();
        throw new Rejection("poison", { deadLetter: true });
      },
      { signal: stop.signal },
    );
    const page = await client.listDeadLetters({ limit: 100 });
    const mine = page.dead_letters.filter((x) => x.origin_queue === id);
    assert.equal(mine.length, 1);
    assert.equal(mine[0]!.reason, "REJECTED");
    assert.deepEqual(mine[0]!.event.message, { i: 7 });
    await client.deleteDestination(id);
  });

  test("a deleted consumer stops consume with its 404", async () => {
    await assert.rejects(client.consume("no-such-consumer-" + process.pid, () => {}), (e: unknown) => e instanceof HeraldError && e.status === 404);
  });
});

/** Takes the next n values of it. */
async function take<T>(it: AsyncIterator<T>, n: number): Promise<T[]> {
  const out: T[] = [];
  while (out.length < n) {
    const r = await it.next();
    if (r.done) throw new Error("the stream ended");
    out.push(r.value);
  }
  return out;
}

/** An intercept that answers every SSE stream open 503 (retryable), to keep a stream down. */
const holdStreams: Intercept = (req, res) => {
  if (!req.url?.startsWith("/api/v1beta/events/stream?")) return "pass";
  res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "0" });
  res.end('{"code":"unavailable","message":"held by the test"}');
  return "handled";
};

/** Publishes events of type until the stream has a live queue (a fresh non-durable queue sees only events published after it opened). */
describe("SSE streams", () => {
  test("reconnect after a cut connection sends the reconnect token as Last-Event-ID and loses nothing published meanwhile", async () => {
    const type = unique("ts.sse");
    const tokens: string[] = [];
    const s = client.streamEvents({ filterGroups: [{ event_type: type, filters: [] }], onReconnectToken: (t) => tokens.push(t) });
    const it = s[Symbol.asyncIterator]();
    const first = it.next();
    await until(() => tokens.length === 1, "connected");
    await client.publish(ev(type, 1));
    assert.deepEqual(((await first).value as ConsumerEvent).message, { i: 1 });
    const opens = () => proxy.seen.filter((x) => x.path.startsWith("/api/v1beta/events/stream?"));
    const before = opens().length;
    // While the stream is down: the proxy holds back the reconnect until
    // Herald has seen the old connection go (an event Herald flushes into a
    // connection it has not yet seen closed counts as delivered: see
    // docs/streams.md), then the event is published.
    proxy.intercept = holdStreams;
    try {
      proxy.dropAll();
      await until(async () => (await client.getDestination(tokens[0]!)).live_sessions === 0, "Herald saw the stream go");
      await client.publish(ev(type, 2)); // published while the stream is down
    } finally {
      proxy.intercept = () => "pass";
    }
    const [second] = await take(it, 1);
    assert.deepEqual(second!.message, { i: 2 });
    const reopened = opens().slice(before);
    assert.ok(reopened.length >= 1);
    assert.equal(reopened[0]!.headers["last-event-id"], tokens[0]);
    assert.equal(tokens.at(-1), tokens[0], "the same queue");
    s.close();
    assert.equal((await it.next()).done, true);
  });

  test("a filter update moves the queue to the new filters", async () => {
    const a = unique("ts.filter-a");
    const b = unique("ts.filter-b");
    const s = client.streamEvents({ filterGroups: [{ event_type: a, filters: [] }] });
    const it = s[Symbol.asyncIterator]();
    const first = it.next();
    await until(() => s.reconnectToken !== undefined, "connected");
    await client.publish(ev(a, 1));
    assert.equal(((await first).value as ConsumerEvent).event_type, a);
    const moved = s.updateFilters([{ event_type: b, filters: [] }]);
    const next = it.next(); // the iterator reads while the update reconnects
    await moved;
    await client.publish(ev(a, 2));
    await client.publish(ev(b, 3));
    const got = (await next).value as ConsumerEvent;
    assert.equal(got.event_type, b);
    assert.deepEqual(got.message, { i: 3 });
    const upd = proxy.seen.filter((x) => x.path.includes("previous_filter_groups="));
    assert.equal(upd.length, 1);
    s.close();
  });

  test("a vanished queue (404 on the token) is replaced by a fresh one from the filters", async () => {
    const type = unique("ts.vanish");
    const resets: unknown[] = [];
    const s = client.streamEvents({ filterGroups: [{ event_type: type, filters: [] }], onReset: (e) => resets.push(e) });
    const it = s[Symbol.asyncIterator]();
    const first = it.next();
    await until(() => s.reconnectToken !== undefined, "connected");
    const oldToken = s.reconnectToken;
    proxy.intercept = (req, res) => {
      if (req.url?.startsWith("/api/v1beta/events/stream?") && req.headers["last-event-id"] === oldToken) {
        res.writeHead(404, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ code: "not_found", message: "no such queue" }));
        return "handled";
      }
      return "pass";
    };
    try {
      proxy.dropAll();
      await until(() => resets.length === 1 && s.reconnectToken !== undefined && s.reconnectToken !== oldToken, "a fresh queue");
    } finally {
      proxy.intercept = () => "pass";
    }
    await client.publish(ev(type, 1));
    assert.deepEqual(((await first).value as ConsumerEvent).message, { i: 1 });
    assert.ok(resets[0] instanceof HeraldError && resets[0].status === 404);
    s.close();
  });

  test("the broker-cancelled error event reconnects; a 404 error event on a durable queue ends the stream", async () => {
    const q = unique("ts-sse-durable");
    await client.ensureDurableQueue({ queue_id: q, filter_groups: [{ event_type: q, filters: [] }] });
    let served = 0;
    proxy.intercept = (req, res) => {
      if (!req.url?.startsWith("/api/v1beta/events/stream-durable?")) return "pass";
      served++;
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(`event: connected\nid: ${q}\ndata: {"message":"Connection established","reconnect_token":"${q}"}\n\n`);
      const e =
        served === 1
          ? { message: "Internal Server Error: The broker cancelled this stream's consumer. Reconnect to resume consuming.", status_code: 500 }
          : { message: "queue not found", status_code: 404 };
      res.end(`event: error\ndata: ${JSON.stringify(e)}\n\n`);
      return "handled";
    };
    try {
      const s = client.streamDurable(q, { reconnectBackoffMs: 1 });
      await assert.rejects(
        (async () => {
          for await (const _ of s) void _;
        })(),
        (e: unknown) => e instanceof StreamError && e.statusCode === 404,
      );
      assert.equal(served, 2);
    } finally {
      proxy.intercept = () => "pass";
    }
    // And the real one delivers.
    const s = client.streamDurable(q);
    const it = s[Symbol.asyncIterator]();
    const first = it.next();
    await until(() => proxy.count((x) => x.path.startsWith(`/api/v1beta/events/stream-durable?queue_id=${q}`)) === 3, "stream open");
    await client.publish(ev(q, 5));
    assert.deepEqual(((await first).value as ConsumerEvent).message, { i: 5 });
    s.close();
    await client.deleteDurableQueue(q);
  });
});

describe("WebSocket streams", () => {
  test("non-durable: a filter update moves the queue, and the token provider is asked at every connect", async () => {
    const a = unique("ts.ws-filter-a");
    const b = unique("ts.ws-filter-b");
    let asked = 0;
    const counting = new HeraldClient({ baseUrl: proxy.url, token: async () => (asked++, TOKEN) });
    const s = counting.websocket({ stream: "non_durable", filterGroups: [{ event_type: a, filters: [] }] });
    const it = s[Symbol.asyncIterator]();
    const first = it.next();
    await until(() => s.reconnectToken !== undefined, "connected");
    await client.publish(ev(a, 1));
    assert.equal(((await first).value as Delivery).event.event_type, a);
    const token = s.reconnectToken;
    const next = it.next();
    await s.updateFilters([{ event_type: b, filters: [] }]);
    assert.equal(s.reconnectToken, token, "the same queue, moved");
    await client.publish(ev(a, 2));
    await client.publish(ev(b, 3));
    const got = ((await next).value as Delivery).event;
    assert.equal(got.event_type, b);
    assert.deepEqual(got.message, { i: 3 });
    assert.equal(asked, 2, "one token per connection");
    await assert.rejects(s.updateFilters([{ event_type: b, filters: [] }]).then(() => s.updateFilters([{ event_type: "x", filters: [{ filter_type: "eq", resource_id: "" }] }])));
    s.close();
  });

  test("durable: an ack in flight across a reconnect is not lost, and no event is yielded twice", async () => {
    const q = unique("ts-ws");
    await client.ensureDurableQueue({ queue_id: q, filter_groups: [{ event_type: q, filters: [] }] });
    await client.publishBatch([ev(q, 1), ev(q, 2), ev(q, 3)]);
    const s = client.websocket({ stream: "durable", queueId: q }, { reconnectBackoffMs: 10 });
    const it = s[Symbol.asyncIterator]();
    const [d1] = await take(it, 1);
    assert.equal(await d1!.ack(), "acked");
    const [d2] = await take(it, 1);
    const acking = d2!.ack(); // sent, and the connection cut under it
    proxy.dropAll();
    const outcome = await acking;
    assert.ok(outcome === "acked" || outcome === "carried", outcome);
    // d2 comes back only if the ack did not arrive; either way it is
    // settled, and the iterator goes on with d3.
    const [d3] = await take(it, 1);
    assert.deepEqual(d3!.event.message, { i: 3 });
    const late: Delivery = d3!;
    proxy.dropAll(); // d3's connection is gone before it is acked
    assert.equal(await late.ack(), "carried");
    await client.publish(ev(q, 4));
    const [d4] = await take(it, 1);
    assert.deepEqual(d4!.event.message, { i: 4 }, "d2 and d3 are not yielded again");
    assert.equal(await d4!.ack(), "acked");
    await until(async () => (await client.getDestination(q)).in_flight === 0, "the queue drained");
    s.close();
    assert.equal((await it.next()).done, true);
    await client.deleteDurableQueue(q);
  });

  test("durable: a nack redelivers the event with a higher delivery count", async () => {
    const q = unique("ts-ws-nack");
    await client.ensureDurableQueue({ queue_id: q, filter_groups: [{ event_type: q, filters: [] }] });
    await client.publish(ev(q, 1));
    const s = client.websocket({ stream: "durable", queueId: q });
    const it = s[Symbol.asyncIterator]();
    const [d1] = await take(it, 1);
    assert.equal(d1!.deliveryCount, 1);
    assert.equal(await d1!.nack(), "nacked");
    const [again] = await take(it, 1);
    assert.equal(again!.event.id, d1!.event.id);
    assert.equal(again!.deliveryCount, 2);
    assert.equal(await again!.ack(), "acked");
    s.close();
    await client.deleteDurableQueue(q);
  });

  test("non-durable: reconnects with its token after a cut connection; a fatal 404 on a durable open ends the stream", async () => {
    const type = unique("ts.ws-nd");
    const tokens: string[] = [];
    const s = client.websocket({ stream: "non_durable", filterGroups: [{ event_type: type, filters: [] }] }, { onReconnectToken: (t) => tokens.push(t) });
    const it = s[Symbol.asyncIterator]();
    const first = it.next();
    await until(() => tokens.length === 1, "connected");
    await client.publish(ev(type, 1));
    assert.deepEqual(((await first).value as Delivery).event.message, { i: 1 });
    proxy.dropAll();
    await client.publish(ev(type, 2));
    const [d2] = await take(it, 1);
    assert.deepEqual(d2!.event.message, { i: 2 });
    await until(() => tokens.length === 2, "reconnected");
    assert.equal(tokens[1], tokens[0]);
    s.close();

    const gone = client.websocket({ stream: "durable", queueId: unique("ts-no-such-queue") });
    await assert.rejects(
      (async () => {
        for await (const _ of gone) void _;
      })(),
      (e: unknown) => e instanceof StreamError && e.statusCode === 404,
    );
  });
});
