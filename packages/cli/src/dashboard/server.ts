// `shardkit dashboard`'s web server (Fastify): the page and its assets, the snapshot as JSON and as
// server-sent events, and the actions. Bound to 127.0.0.1 unless told otherwise; anywhere else it
// needs a token, and with a token every request without it is answered 401. Actions only with
// `allowActions`, each a POST naming itself in a header (a form or an image on another site cannot
// send one) from the page's own origin.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { isIP } from "node:net";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { constants, createGzip } from "node:zlib";
import type {} from "@fastify/cookie";
import type { LoadMeasure } from "@shardkit/ownership";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { type ConfigOptions, openConfig } from "../config.js";
import { AddressInUseError, UsageError } from "../errors.js";
import { positiveMsIssues } from "../flags.js";
import { Actions } from "./actions.js";
import { Collector } from "./collect.js";
import { SnapshotStream, StreamLimit, type StreamStats } from "./stream.js";
import type { DashboardSnapshot } from "./types.js";

export type { DashboardSnapshot } from "./types.js";

/** Options of `startDashboard` (`shardkit dashboard`'s flags). */
export interface DashboardOptions extends ConfigOptions {
  /** The address to listen on. Default 127.0.0.1; any other needs `token`. */
  host?: string;
  /** The port. Default 7420; 0: any free one (the answer says which). */
  port?: number;
  /**
   * Required of every request when set (a cookie the page gets from `/?token=...`, or
   * `Authorization: Bearer ...`); required to listen anywhere but the loopback.
   */
  token?: string;
  /** Lets the page start a balance of the plan it shows, pause and resume it, and drain a database. */
  allowActions?: boolean;
  /** How often each piece is read again and the page updated (ms). Default 2000. */
  refreshMs?: number;
  /** The load shown: the windows of the last `windowMs` (ms). Default 300000. */
  windowMs?: number;
  /** What a shard's load is: time in the database, calls or writes (per second). Default `time`. */
  by?: LoadMeasure;
  /** How long each database may take to answer each read (ms). Default 5000. */
  timeoutMs?: number;
  /** The app's tables holding shard rows (`Table[:column[:bits]]`, as for `move`): the balancer's sizes, and moves. */
  tables?: readonly string[];
  /**
   * Event streams one client address may hold open (each costs at most one snapshot of memory,
   * however slowly its client reads). Default 16.
   */
  maxStreams?: number;
  /** How a balance or drain started from the page moves shards. Default `live`. */
  mode?: "live" | "offline";
}

/** A dashboard that listens. */
export interface Dashboard {
  /** The address to open (with `?token=` when a token is set). */
  url: string;
  host: string;
  port: number;
  /** The last snapshot. */
  snapshot(): DashboardSnapshot;
  /** The event streams open, and what their clients have not read yet. */
  streams(): StreamStats;
  /** The move a run started from the page is making now (what closing waits for). */
  running(): { shard: string; from: string; to: string } | null;
  /** Stops listening and reading; a balance under way ends its move first. */
  close(): Promise<void>;
}

/** Cookies are shared by every port of a host: each dashboard's has its port in its name. */
const cookieName = (port: number) => `shardkit_dashboard_${port}`;
/** What the cookie holds: a MAC of the token, never the token (another service of the host sees its cookies). */
const cookieValue = (token: string) =>
  createHmac("sha256", token).update("shardkit dashboard cookie").digest("hex");
const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

/**
 * The page's folder (it ships in the package's `dashboard/`): beside `dist/` when built, two up from
 * `src/dashboard/` in the repository.
 */
function pageFolder(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const folders = [resolve(here, "../dashboard"), resolve(here, "../../dashboard")];
  return folders.find((d) => existsSync(resolve(d, "index.html"))) ?? folders[0]!;
}

const digest = (text: string) => createHash("sha256").update(text).digest();

/** Whether `given` is the token (compared in constant time). */
function tokenMatches(token: string, given: string | undefined): boolean {
  return given !== undefined && timingSafeEqual(digest(token), digest(given));
}

/** The host (with port) an Origin header names; undefined when it names none ("null", garbage). */
function originHost(origin: string): string | undefined {
  try {
    return new URL(origin).host || undefined;
  } catch {
    return undefined;
  }
}

const gzipAccepted = (request: FastifyRequest) =>
  /\bgzip\b/.test(String(request.headers["accept-encoding"] ?? ""));

/** What is wrong with `options` (`UsageError`'s lines): none when the dashboard can start. */
function optionIssues(
  options: DashboardOptions,
  host: string,
  port: number,
  token: string | undefined,
): string[] {
  const issues: string[] = [];
  if (!LOOPBACK.has(host) && token === undefined)
    issues.push(
      `--host ${host}: listening beyond this machine needs a token (--token <secret> or SHARDKIT_DASHBOARD_TOKEN): every request without it is refused`,
    );
  if (!LOOPBACK.has(host) && isIP(host) === 0 && host !== "0.0.0.0")
    issues.push(`--host ${host}: expected an IP address to listen on`);
  if (token !== undefined && token.length < 16)
    issues.push("--token: at least 16 characters (a random one: openssl rand -hex 16)");
  if (!(Number.isInteger(port) && port >= 0 && port <= 65535))
    issues.push(`--port: expected 0..65535, got ${port}`);
  issues.push(
    ...positiveMsIssues([
      ["--refresh", options.refreshMs],
      ["--window", options.windowMs],
      ["--timeout", options.timeoutMs],
    ]),
  );
  if (options.maxStreams !== undefined && !(Number.isInteger(options.maxStreams) && options.maxStreams > 0))
    issues.push(`--max-streams: expected a positive whole number, got ${options.maxStreams}`);
  if (options.allowActions && (options.tables ?? []).length === 0)
    issues.push(
      "--allow-actions: list every table of yours holding shard rows (--table Wallet --table Transfer): the moves a balance or drain makes copy them",
    );
  return issues;
}

/**
 * Every request's checks: security headers; on the loopback, only requests addressed to the
 * loopback (DNS rebinding); with a token, the cookie the printed address sets or the token as a
 * bearer, else 401. `cookie()` is the cookie's name, known once the port is (`--port 0`).
 */
function guardRequests(app: FastifyInstance, host: string, token: string | undefined, cookie: () => string) {
  const hostAllowed = (request: FastifyRequest) => {
    if (!LOOPBACK.has(host)) return true;
    const name = String(request.headers.host ?? "")
      .replace(/:\d+$/, "")
      .replace(/^\[(.*)\]$/, "$1");
    return LOOPBACK.has(name);
  };
  app.addHook("onRequest", async (request, reply) => {
    void reply.headers(SECURITY_HEADERS);
    if (!hostAllowed(request)) return reply.code(421).type("text/plain").send("wrong host\n");
    if (token === undefined) return;
    const url = new URL(request.url, "http://dashboard");
    const given = url.searchParams.get("token");
    // The address printed at start carries the token once: it becomes a cookie, and leaves the URL
    // (whatever cookie the browser had).
    if (request.method === "GET" && url.pathname === "/" && given !== null && tokenMatches(token, given)) {
      return reply
        .code(303)
        .setCookie(cookie(), cookieValue(token), { httpOnly: true, sameSite: "strict", path: "/" })
        .header("location", "/")
        .send();
    }
    const bearer = /^Bearer (.+)$/.exec(String(request.headers.authorization ?? ""))?.[1];
    if (tokenMatches(cookieValue(token), request.cookies[cookie()]) || tokenMatches(token, bearer)) return;
    return reply
      .code(401)
      .header("www-authenticate", 'Bearer realm="shardkit dashboard"')
      .type("text/plain")
      .send("not authorised: open the address `shardkit dashboard` printed (it carries the token)\n");
  });
}

/**
 * The page at `/`, its modules and styles under `/assets/` (the files of its folder when the
 * dashboard starts), uPlot's from the uplot package, and `/api/state` (the last snapshot).
 */
async function servePage(app: FastifyInstance, collector: Collector) {
  const { default: fastifyStatic } = await import("@fastify/static");
  const uplot = dirname(createRequire(import.meta.url).resolve("uplot/dist/uPlot.iife.min.js"));
  // `cache-control` is the guard's (no-store); `index.html` is the page at `/` only.
  await app.register(fastifyStatic, {
    root: pageFolder(),
    prefix: "/assets/",
    wildcard: false,
    globIgnore: ["index.html"],
    index: false,
    cacheControl: false,
  });
  app.get("/", (_request, reply) => reply.sendFile("index.html"));
  app.get("/assets/uplot.js", (_request, reply) => reply.sendFile("uPlot.iife.min.js", uplot));
  app.get("/assets/uplot.css", (_request, reply) => reply.sendFile("uPlot.min.css", uplot));
  app.get("/api/state", async (_request, reply) =>
    reply.type("application/json; charset=utf-8").send(collector.snapshotText()),
  );
}

/**
 * `/api/events`: the snapshot as server-sent events, each stream holding at most one unread snapshot
 * (`SnapshotStream`), at most `limit.max` per client address (429 past that). `streams` holds each
 * open stream and how to end it.
 */
function serveEvents(
  app: FastifyInstance,
  collector: Collector,
  streams: Map<SnapshotStream, () => void>,
  limit: StreamLimit,
) {
  app.get("/api/events", (request, reply) => {
    if (request.method === "HEAD") return reply.type("text/event-stream; charset=utf-8").send();
    const client = request.ip;
    if (!limit.take(client))
      return reply
        .code(429)
        .type("text/plain")
        .send(
          `too many event streams from ${client}: ${limit.max} are open (close a tab, or start the dashboard with a higher --max-streams)\n`,
        );
    const gzip = gzipAccepted(request);
    reply.raw.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": "text/event-stream; charset=utf-8",
      connection: "keep-alive",
      ...(gzip ? { "content-encoding": "gzip", vary: "accept-encoding" } : {}),
    });
    // Each event is flushed through the compressor as it is written: the page gets it at once.
    const zip = gzip ? createGzip({ flush: constants.Z_SYNC_FLUSH }) : null;
    if (zip) zip.pipe(reply.raw);
    const out = zip ?? reply.raw;
    const stream = new SnapshotStream(
      out,
      () => out.writableLength + (zip ? zip.readableLength + reply.raw.writableLength : 0),
      () => collector.snapshotText(),
      zip ? [zip, reply.raw] : [reply.raw],
    );
    const end = () => {
      if (!streams.delete(stream)) return;
      limit.give(client);
      unsubscribe();
      stream.end();
    };
    streams.set(stream, end);
    const unsubscribe = collector.subscribe(() => stream.offer());
    stream.offer();
    request.raw.on("close", end);
    // A client gone mid-write: the stream ends, the dashboard goes on.
    out.on("error", end);
    if (zip) reply.raw.on("error", end);
    reply.hijack();
  });
}

/** `/api/actions/:name`: plan, and with `allowActions` balance, pause, resume and drain. */
function serveActions(app: FastifyInstance, collector: Collector, actions: Actions) {
  app.post<{ Params: { name: string }; Body: Record<string, unknown> | undefined }>(
    "/api/actions/:name",
    async (request, reply) => {
      const { name } = request.params;
      const refuse = (status: number, message: string) => reply.code(status).send({ ok: false, message });
      if (request.headers["x-shardkit-action"] !== name)
        return refuse(400, "an action names itself in the X-Shardkit-Action header");
      // A browser names the page an action comes from: it must be the dashboard's own (a sandboxed
      // frame sends "null"). Scripts (curl) send none, and need the token like any request.
      const origin = request.headers.origin;
      if (origin !== undefined && originHost(origin) !== request.headers.host)
        return refuse(403, "an action comes from the dashboard's own page");
      const body = request.body ?? {};
      if (name === "plan") {
        const answer = await actions.plan();
        return reply.code(answer.status).send({ ok: answer.ok, message: answer.message });
      }
      if (!["balance", "pause", "resume", "drain"].includes(name)) return refuse(404, `no action ${name}`);
      if (!collector.settings.allowActions)
        return refuse(403, "actions are off: start the dashboard with --allow-actions");
      const answer =
        name === "balance"
          ? actions.balance(body.planAt)
          : name === "pause"
            ? actions.pause()
            : name === "resume"
              ? actions.resume(body.left)
              : actions.drainDatabase(body.database);
      return reply.code(answer.status).send({ ok: answer.ok, message: answer.message });
    },
  );
}

/**
 * The server, every route in place, not listening yet. Fastify and its plugins are loaded here, while
 * the first reads are under way (loading them takes about as long as a database's load sum).
 */
async function makeServer(
  options: DashboardOptions,
  host: string,
  token: string | undefined,
  parts: {
    collector: Collector;
    actions: Actions;
    streams: Map<SnapshotStream, () => void>;
    cookie: () => string;
  },
): Promise<FastifyInstance> {
  const [{ default: Fastify }, { default: fastifyCookie }, { default: fastifyCompress }] = await Promise.all([
    import("fastify"),
    import("@fastify/cookie"),
    import("@fastify/compress"),
  ]);
  const app = Fastify({ logger: false, bodyLimit: 16 * 1024 });
  await app.register(fastifyCookie);
  // Every answer gzipped for clients that take it (but the event stream's, flushed event by event).
  await app.register(fastifyCompress, { encodings: ["gzip"] });
  guardRequests(app, host, token, parts.cookie);
  await servePage(app, parts.collector);
  serveEvents(app, parts.collector, parts.streams, new StreamLimit(options.maxStreams ?? 16));
  serveActions(app, parts.collector, parts.actions);
  return app;
}

/**
 * Starts `shardkit dashboard`: reads the configuration, then reads every database while it makes
 * its server and listens (a database that does not answer is shown down; the rest go on), and
 * resolves once each piece was read once. Throws `UsageError` for settings that make no sense
 * (another address than the loopback without a token), `AddressInUseError` when the port is
 * taken, and the configuration's own errors.
 */
export async function startDashboard(options: DashboardOptions = {}): Promise<Dashboard> {
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 7420;
  const token = options.token === "" ? undefined : options.token;
  const issues = optionIssues(options, host, port, token);
  if (issues.length > 0) throw new UsageError(issues);
  // Read-only, the tables only size the balancer's moves: none is fine (shardkit's own are counted).
  // `move` (and @shardkit/ownership with it) is loaded only for them: without, the first reads go
  // out before it is.
  const tables =
    (options.tables ?? []).length > 0 ? (await import("../move.js")).parseTables(options.tables!) : [];
  const opened = openConfig(options);
  const collector = new Collector(opened, {
    refreshMs: options.refreshMs ?? 2000,
    windowMs: options.windowMs ?? 300_000,
    by: options.by ?? "time",
    timeoutMs: options.timeoutMs ?? 5000,
    tables,
    mode: options.mode ?? "live",
    allowActions: options.allowActions ?? false,
  });
  const actions = new Actions(opened, collector);
  // The first reads and the server's making do not wait for each other: the first snapshot is
  // what this resolves with. A failure of the reads is taken once the server listens. Fastify and
  // its plugins load once the load and the probes are sent (their sums run meanwhile).
  const { sent, read: firstRead } = collector.start();
  firstRead.catch(() => {});
  await sent;
  /** Each open event stream, and how to end it. */
  const streams = new Map<SnapshotStream, () => void>();
  // The port is known once listening (`--port 0`): the hook reads the cookie's name then.
  let cookie = "";
  let app: FastifyInstance | undefined;
  try {
    app = await makeServer(options, host, token, { collector, actions, streams, cookie: () => cookie });
    await app.listen({ host, port });
  } catch (error) {
    collector.stop();
    await app?.close();
    await opened.close();
    if ((error as { code?: unknown }).code === "EADDRINUSE")
      throw new AddressInUseError(host, port, { cause: error });
    throw error;
  }
  const server = app;
  const address = server.server.address();
  const bound = typeof address === "object" && address ? address.port : port;
  cookie = cookieName(bound);
  try {
    await firstRead;
  } catch (error) {
    collector.stop();
    await server.close();
    await opened.close();
    throw error;
  }
  const shown = host.includes(":") ? `[${host}]` : host;
  const url = `http://${shown}:${bound}/${token !== undefined ? `?token=${encodeURIComponent(token)}` : ""}`;
  return {
    url,
    host,
    port: bound,
    snapshot: () => collector.snapshot(),
    running: () => actions.current(),
    streams: () => ({
      open: streams.size,
      unreadBytes: [...streams.keys()].reduce((sum, s) => sum + s.unreadBytes(), 0),
    }),
    async close() {
      // A run under way ends its move first; the page keeps showing it meanwhile.
      await actions.close();
      collector.stop();
      for (const end of [...streams.values()]) end();
      await server.close();
      await opened.close();
    },
  };
}
