// What the dashboard's tests share: the `shardkit dashboard` binary started as a user starts it (its
// address read from what it prints), Debian's Chromium driven by playwright-core (never a browser
// download), screenshots kept as artefacts, and load windows written as routers write them.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ShardIdentifier } from "@shardkit/id";
import { LatencySketch } from "@shardkit/prisma";
import { CREATE_LOAD_TABLE, FLUSH_LOAD } from "@shardkit/prisma/internal";
import type { Browser, Page } from "playwright-core";
import { launch } from "./chromium.js";
import { BIN } from "./cli.js";
import { withClient } from "./pg.js";

/** Where the tests keep their screenshots (the CLI README shows copies of them). */
export const ARTIFACTS = fileURLToPath(new URL("./artifacts/", import.meta.url));

/** A dashboard started with `shardkit dashboard ...args`. */
export interface RunningDashboard {
  /** The address it printed (with its token when it has one). */
  url: string;
  /** Its origin (`http://127.0.0.1:port`). */
  origin: string;
  child: ChildProcess;
  stderr(): string;
  /** Ctrl-C: resolves with its exit code. */
  stop(): Promise<number | null>;
}

/** Starts `shardkit dashboard` (port 0: any free one) and waits for the address it prints. */
export function startDashboardCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<RunningDashboard> {
  const { SHARDKIT_SHARDS: _, SHARDKIT_DASHBOARD_TOKEN: __, ...base } = process.env;
  const child = spawn(process.execPath, [BIN, "dashboard", "--port", "0", ...args], {
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  let stdout = "";
  child.stdout!.on("data", (d) => (stdout += d));
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    child.stderr!.on("data", (d) => {
      stderr += d;
      const url = /shardkit dashboard: (http:\/\/\S+)/.exec(stderr)?.[1];
      if (url)
        resolve({
          url,
          origin: new URL(url).origin,
          child,
          stderr: () => stderr,
          stop: async () => {
            child.kill("SIGINT");
            return exited;
          },
        });
    });
    void exited.then((code) =>
      reject(
        new Error(`shardkit dashboard exited (${code}) before printing its address:\n${stderr}${stdout}`),
      ),
    );
  });
}

/** Debian's Chromium, headless (playwright gives it a fresh profile of its own, removed on close). */
export async function launchChromium(): Promise<{ browser: Browser; close(): Promise<void> }> {
  const browser = await launch();
  return {
    browser,
    async close() {
      await browser.close();
    },
  };
}

/** A screenshot of the whole page, kept in test/artifacts/ (`name`.jpg). */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.jpg`), fullPage: true, type: "jpeg", quality: 60 });
}

/** Load a router recorded for one shard in one window. */
export interface Recorded {
  shard: string;
  calls: number;
  writes?: number;
  /** Time in the database per call (ms). */
  msPerCall: number;
  /** Heaviest keys and their calls. */
  top?: Record<string, number>;
}

/**
 * Writes load windows into a database's `shardkit."ShardLoad"` with the statement a router's flush
 * sends (`FLUSH_LOAD`): one window per entry, starting `agoMs` ago, lasting `windowMs`.
 */
export async function recordLoad(
  url: string,
  entries: Recorded[],
  options: { agoMs?: number; windowMs?: number; router?: string } = {},
): Promise<void> {
  const windowMs = options.windowMs ?? 10_000;
  const start = new Date(Date.now() - (options.agoMs ?? windowMs));
  const rows = entries.map((e) => {
    const sketch = new LatencySketch();
    sketch.record(e.msPerCall, e.calls);
    return {
      shard: ShardIdentifier.parse(e.shard).bits,
      window_start: start.toISOString(),
      window_ms: windowMs,
      router: options.router ?? "test-router",
      calls: e.calls,
      writes: e.writes ?? 0,
      rows_written: e.writes ?? 0,
      db_ms: e.calls * e.msPerCall,
      sketch: sketch.toJSON(),
      top: Object.entries(e.top ?? {}).map(([key, count]) => ({ key, count, error: 0 })),
      config: "test-config",
    };
  });
  await withClient(url, async (client) => {
    for (const statement of CREATE_LOAD_TABLE) await client.query(statement);
    await client.query(FLUSH_LOAD, [JSON.stringify(rows), new Date(Date.now() - 86_400_000).toISOString()]);
  });
}
