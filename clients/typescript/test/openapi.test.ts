// src/openapi.ts is generated from Herald's OpenAPI document: a server
// change that alters the document fails here until the types are
// regenerated (npm run generate), and tsc then checks the client against
// the new types.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { repoDir } from "./harness.js";

test("src/openapi.ts is generated from functions/openapi/openapi.yaml", () => {
  const pkg = join(repoDir, "clients", "typescript");
  const dir = mkdtempSync(join(tmpdir(), "herald-openapi-"));
  try {
    const out = join(dir, "openapi.ts");
    execFileSync(join(pkg, "node_modules", ".bin", "openapi-typescript"), [join(repoDir, "functions", "openapi", "openapi.yaml"), "-o", out], {
      cwd: pkg,
      stdio: ["ignore", "ignore", "inherit"],
    });
    const want = readFileSync(out, "utf8");
    const got = readFileSync(join(pkg, "src", "openapi.ts"), "utf8");
    assert.ok(got === want, "src/openapi.ts is stale: run `npm run generate` in clients/typescript and commit it");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
