// The browser build in real headless Chromium (Debian's /usr/bin/chromium,
// which .ci/run installs, driven by playwright-core): a page of Herald's
// own origin imports dist/index.js, publishes, streams over SSE (read with
// fetch, through a cut connection) and consumes a durable queue over a
// WebSocket, acknowledging every event.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { chromium, type Browser } from "playwright-core";

import { HeraldClient } from "../src/index.js";
import { Proxy, startHerald, TOKEN, until, type Herald } from "./harness.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const dist = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "dist");

let herald: Herald;
let proxy: Proxy;
let browser: Browser;

before(async () => {
  herald = await startHerald();
  proxy = await new Proxy(herald.url).start();
  for (const f of readdirSync(dist).filter((f) => f.endsWith(".js"))) {
    const body = readFileSync(join(dist, f));
    proxy.routes.set(`/dist/${f}`, (res) => {
      res.writeHead(200, { "Content-Type": "text/javascript; charset=utf-8" });
      res.end(body);
    });
  }
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
});

after(async () => {
  await browser?.close();
  await proxy?.stop();
  await herald?.stop();
});

/** The page: the README's browser example, recording what it receives. */
const page = (queue: string, type: string) => `<!doctype html>
<html><head><title>herald client</title></head><body><script type="module">
import { HeraldClient } from "/dist/index.js";
const client = new HeraldClient({ baseUrl: location.origin, token: ${JSON.stringify(TOKEN)} });
const r = (window.results = { sse: [], ws: [], tokens: [], errors: [] });

(async () => {
  const stream = client.streamEvents({
    filterGroups: [{ event_type: ${JSON.stringify(type)}, filters: [] }],
    onReconnectToken: (t) => r.tokens.push(t),
  });
  for await (const event of stream) {
    r.sse.push(event.message);
    if (r.sse.length === 3) stream.close();
  }
})().catch((e) => r.errors.push("sse: " + e));

(async () => {
  const stream = client.websocket({ stream: "durable", queueId: ${JSON.stringify(queue)} });
  for await (const d of stream) {
    r.ws.push({ message: d.event.message, outcome: await d.ack() });
    if (r.ws.length === 3) stream.close();
  }
})().catch((e) => r.errors.push("ws: " + e));

window.publish = (i) => client.publish({ event_type: ${JSON.stringify(type)}, message: { i } }).then((res) => res.success);
</script></body></html>`;

interface Results {
  sse: unknown[];
  ws: { message: unknown; outcome: string }[];
  tokens: string[];
  errors: string[];
}

test("a page streams over SSE and WebSocket, acknowledges, and reconnects with its token in Chromium", async () => {
  const node = new HeraldClient({ baseUrl: herald.url, token: TOKEN });
  const queue = `ts-browser-${process.pid}`;
  const type = `ts.browser.${process.pid}`;
  await node.ensureDurableQueue({ queue_id: queue, filter_groups: [{ event_type: queue, filters: [] }] });
  await node.publishBatch([1, 2, 3].map((i) => ({ event_type: queue, message: { i } })));
  proxy.routes.set("/page", (res) => {
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    res.end(page(queue, type));
  });

  const tab = await browser.newPage();
  tab.on("pageerror", (e) => console.error("page error:", e));
  await tab.goto(`${proxy.url}/page`);
  const results = () => tab.evaluate(() => (window as unknown as { results: Results }).results);

  await until(async () => (await results()).tokens.length === 1, "the SSE stream connected");
  assert.equal(await tab.evaluate(() => (window as unknown as { publish: (i: number) => Promise<boolean> }).publish(1)), true);
  await until(async () => (await results()).sse.length === 1, "the first SSE event");
  // The page's streams are cut, and its SSE reconnects held back until
  // Herald has seen the old connection go (an event Herald flushes into a
  // connection it has not yet seen closed counts as delivered: see
  // docs/streams.md); then events are published while it is down.
  proxy.intercept = (req, res) => {
    if (!req.url?.startsWith("/api/v1beta/events/stream?")) return "pass";
    res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "0" });
    res.end('{"code":"unavailable","message":"held by the test"}');
    return "handled";
  };
  try {
    proxy.dropAll();
    const token = (await results()).tokens[0]!;
    await until(async () => (await node.getDestination(token)).live_sessions === 0, "Herald saw the stream go");
    for (const i of [2, 3]) await node.publish({ event_type: type, message: { i } });
  } finally {
    proxy.intercept = () => "pass";
  }
  await until(async () => (await results()).sse.length === 3, "the SSE events after the reconnect");
  await until(async () => (await results()).ws.length === 3, "the WebSocket events");

  const r = await results();
  assert.deepEqual(r.errors, []);
  assert.deepEqual(r.sse, [{ i: 1 }, { i: 2 }, { i: 3 }]);
  assert.ok(r.tokens.length >= 2 && r.tokens.every((t) => t === r.tokens[0]), "reconnected to the same queue");
  const sseOpens = proxy.seen.filter((s) => s.path.startsWith("/api/v1beta/events/stream?"));
  assert.equal(sseOpens[1]?.headers["last-event-id"], r.tokens[0], "the browser sent the token as Last-Event-ID");
  assert.deepEqual(
    r.ws.map((x) => x.message).sort((a, b) => (a as { i: number }).i - (b as { i: number }).i),
    [{ i: 1 }, { i: 2 }, { i: 3 }],
  );
  // Every WebSocket event was acknowledged, or carried over the cut connection and acknowledged on its redelivery.
  await until(async () => (await node.getDestination(queue)).in_flight === 0, "the durable queue drained");
  await tab.close();
  await node.deleteDurableQueue(queue);
});
