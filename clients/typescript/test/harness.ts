// Starts a real Herald (`herald serve`, in memory, on a free loopback
// port) for the tests, and a pass-through proxy in front of it that can
// cut connections, refuse or swallow answers, as a restart, a proxy
// timeout or a lost answer would.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const repoDir = resolve(pkgDir, "..", "..");
export const TOKEN = "ts-client-test-token-0123456789";

/** The herald binary: $HERALD_BIN (make test-ts builds it), else built once into build/herald. */
export function heraldBin(): string {
  if (process.env.HERALD_BIN) return process.env.HERALD_BIN;
  const bin = join(pkgDir, "build", "herald");
  if (!existsSync(bin)) execFileSync("go", ["build", "-o", bin, "./cmd/herald"], { cwd: repoDir, stdio: "inherit" });
  return bin;
}

export interface Herald {
  url: string;
  stop(): Promise<void>;
}

/** Starts `herald serve` with the dev token on 127.0.0.1:0 and waits for the address it logs. */
export async function startHerald(env: Record<string, string> = {}): Promise<Herald> {
  const child: ChildProcess = spawn(heraldBin(), ["serve"], {
    env: { ...process.env, HERALD_ADDR: "127.0.0.1:0", HERALD_DEV_TOKEN: TOKEN, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const url = await new Promise<string>((ok, fail) => {
    const t = setTimeout(() => fail(new Error("herald did not log its address in 60 s:\n" + log)), 60_000);
    child.stderr!.on("data", (b: Buffer) => {
      log += b.toString();
      const m = /addr=(http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (m) {
        clearTimeout(t);
        ok(m[1]!);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(t);
      fail(new Error(`herald exited (${code}):\n${log}`));
    });
  });
  child.removeAllListeners("exit");
  child.stderr!.removeAllListeners("data");
  child.stderr!.resume();
  return {
    url,
    stop: () =>
      new Promise<void>((ok) => {
        if (child.exitCode !== null) return ok();
        child.once("exit", () => ok());
        child.kill("SIGTERM");
      }),
  };
}

/** What the proxy does with a request: pass it on, or answer it itself. */
export type Intercept = (req: http.IncomingMessage, res: http.ServerResponse) => "pass" | "handled" | "swallow";

/** A request the proxy saw. */
export interface Seen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  at: number;
}

/** A pass-through proxy in front of Herald on 127.0.0.1:0, with the WebSocket upgrade piped. */
export class Proxy {
  url = "";
  seen: Seen[] = [];
  intercept: Intercept = () => "pass";
  /** Extra routes the proxy serves itself (the browser test's page). */
  routes = new Map<string, (res: http.ServerResponse) => void>();
  private server: http.Server;
  private sockets = new Set<net.Socket>();
  private target: URL;

  constructor(heraldUrl: string) {
    this.target = new URL(heraldUrl);
    this.server = http.createServer((req, res) => this.serve(req, res));
    this.server.on("connection", (s: net.Socket) => this.track(s));
    this.server.on("upgrade", (req, socket: net.Socket, head: Buffer) => this.upgrade(req, socket, head));
  }

  async start(): Promise<this> {
    await new Promise<void>((ok) => this.server.listen(0, "127.0.0.1", ok));
    const a = this.server.address() as net.AddressInfo;
    this.url = `http://127.0.0.1:${a.port}`;
    return this;
  }

  /** Cuts every open connection (streams, WebSockets, idle keep-alives), from the server side. */
  dropAll(): number {
    const n = this.sockets.size;
    for (const s of this.sockets) s.destroy();
    return n;
  }

  async stop(): Promise<void> {
    this.dropAll();
    await new Promise<void>((ok) => this.server.close(() => ok()));
  }

  count(pred: (s: Seen) => boolean): number {
    return this.seen.filter(pred).length;
  }

  private track(s: net.Socket): void {
    this.sockets.add(s);
    s.on("close", () => this.sockets.delete(s));
  }

  private serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = req.url ?? "/";
    this.seen.push({ method: req.method ?? "", path, headers: req.headers, at: Date.now() });
    const route = this.routes.get(path.split("?")[0]!);
    if (route) return route(res);
    const what = this.intercept(req, res);
    if (what === "handled") return;
    const up = http.request(
      { host: this.target.hostname, port: this.target.port, method: req.method, path, headers: req.headers },
      (ures) => {
        if (what === "swallow") {
          // Herald applied the request; its answer is lost with the connection.
          ures.resume();
          ures.on("end", () => req.socket.destroy());
          return;
        }
        res.writeHead(ures.statusCode ?? 502, ures.headers);
        res.flushHeaders();
        ures.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    req.pipe(up);
  }

  private upgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    this.seen.push({ method: req.method ?? "", path: req.url ?? "/", headers: req.headers, at: Date.now() });
    const up = net.connect(Number(this.target.port), this.target.hostname, () => {
      let h = `${req.method} ${req.url} HTTP/1.1\r\n`;
      for (let i = 0; i < req.rawHeaders.length; i += 2) h += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
      up.write(h + "\r\n");
      if (head.length > 0) up.write(head);
      up.pipe(socket);
      socket.pipe(up);
    });
    this.track(up);
    up.on("error", () => socket.destroy());
    socket.on("error", () => up.destroy());
    socket.on("close", () => up.destroy());
    up.on("close", () => socket.destroy());
  }
}

/** Waits until cond holds, polling every 20 ms; fails after limitMs (a bound for a hung test, not a speed assertion). */
export async function until(cond: () => boolean | Promise<boolean>, what: string, limitMs = 30_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
