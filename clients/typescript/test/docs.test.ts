// docs/typescript.md's Node worker (its "js run" block), run as a program
// against a real Herald whose connections are cut while it works: it must
// drain a durable consumer with nothing lost and nothing committed twice,
// and stop on SIGINT.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { HeraldClient } from "../src/index.js";
import { Proxy, repoDir, startHerald, TOKEN, until, type Herald } from "./harness.js";

let herald: Herald;
let proxy: Proxy;

before(async () => {
  herald = await startHerald();
  proxy = await new Proxy(herald.url).start();
});

after(async () => {
  await proxy?.stop();
  await herald?.stop();
});

/** The blocks of a Markdown file fenced as "```js run". */
function runBlocks(path: string): string[] {
  const blocks: string[] = [];
  let cur: string[] | undefined;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (cur === undefined && line.trim() === "```js run") cur = [];
    else if (cur !== undefined && line.trim() === "```") {
      blocks.push(cur.join("\n"));
      cur = undefined;
    } else cur?.push(line);
  }
  return blocks;
}

test("docs/typescript.md's worker drains a durable consumer through cut connections", async () => {
  const blocks = runBlocks(join(repoDir, "docs", "typescript.md"));
  assert.equal(blocks.length, 1, "docs/typescript.md has one js run block");
  // Inside the package, so that "@heraldevents/client" resolves to it.
  const program = join(repoDir, "clients", "typescript", "build", "doc-worker.mjs");
  writeFileSync(program, blocks[0]!);

  const client = new HeraldClient({ baseUrl: herald.url, token: TOKEN });
  const type = `ts.docs.${process.pid}`;
  const dest = await client.createDestination({ filter_groups: [{ event_type: type, filters: [] }] });
  const total = 60;
  await client.publishBatch(Array.from({ length: total }, (_, i) => ({ event_type: type, message: { i } })));

  const child = spawn(process.execPath, [program], {
    env: { ...process.env, HERALD_URL: proxy.url, HERALD_TOKEN: TOKEN, CONSUMER_ID: dest.id },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr.on("data", (b: Buffer) => (err += b.toString()));
  const exited = new Promise<number | null>((ok) => child.on("exit", (code) => ok(code)));
  const lines = () => out.split("\n").filter((l) => l.startsWith("001."));
  try {
    await until(() => lines().length >= 1, "the worker's first event");
    proxy.dropAll();
    await until(() => lines().length >= total / 2, "half of the events");
    proxy.dropAll();
    await until(() => new Set(lines().map((l) => l.split(" ")[0])).size >= total, `all ${total} events`);
    await until(async () => (await client.getDestination(dest.id)).in_flight === 0, "every batch acknowledged");
  } finally {
    child.kill("SIGINT");
  }
  assert.equal(await exited, 0, `the worker exits cleanly on SIGINT; stderr:\n${err}`);
  const seqs = lines().map((l) => l.split(" ")[0]!);
  assert.equal(seqs.length, total, "each event handled once");
  assert.equal(new Set(seqs).size, total);
  const d = await client.getDestination(dest.id);
  assert.equal(d.committed, [...seqs].sort().at(-1), "the cursor is past the last event");
  await client.deleteDestination(dest.id);
});
