// Test helper: the second PostgreSQL server ("shardb" on 127.0.0.1:5433) that fault tests stop and
// start. Idempotent (creates the cluster only if absent, starts it only if down) and guarded by a
// lock directory shared by every process on the machine, so two test files (of any package) never
// manage or stop the cluster at the same time. Other users of shardb should take the same lock.
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";

const exec = promisify(execFile);

export const SHARDB_PORT = 5433;
const CLUSTER = "shardb";
const LOCK = "/tmp/shardkit-pg-shardb.lock";
const LOCK_STALE_MS = 180_000;

const pgVersion = (): string => {
  const versions = readdirSync("/etc/postgresql").sort();
  const v = versions[versions.length - 1];
  if (!v) throw new Error("no PostgreSQL under /etc/postgresql");
  return v;
};

const run = (cmd: string, args: string[]) => exec(cmd, args, { timeout: 60_000, encoding: "utf8" });

async function withLock<T>(fn: () => Promise<T>): Promise<T> {
  const until = Date.now() + 150_000;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      try {
        if (Date.now() - statSync(LOCK).mtimeMs > LOCK_STALE_MS) rmSync(LOCK, { recursive: true, force: true });
      } catch {}
      if (Date.now() > until) throw new Error(`timed out waiting for ${LOCK}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

async function status(): Promise<"absent" | "online" | "down"> {
  const { stdout } = await run("pg_lsclusters", ["--no-header"]);
  for (const line of stdout.split("\n")) {
    const [version, name, , state] = line.trim().split(/\s+/);
    if (version === pgVersion() && name === CLUSTER) return state === "online" ? "online" : "down";
  }
  return "absent";
}

async function start(): Promise<void> {
  await run("pg_ctlcluster", ["--skip-systemctl-redirect", pgVersion(), CLUSTER, "start"]);
  await waitReady();
}

async function waitReady(): Promise<void> {
  const until = Date.now() + 30_000;
  for (;;) {
    try {
      await run("pg_isready", ["-q", "-h", "127.0.0.1", "-p", String(SHARDB_PORT)]);
      return;
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Makes sure the shardb cluster exists (trust auth, 127.0.0.1 only) and is running. */
export function ensureShardb(): Promise<void> {
  return withLock(async () => {
    const s = await status();
    if (s === "absent") {
      await run("pg_createcluster", [
        pgVersion(),
        CLUSTER,
        "--port",
        String(SHARDB_PORT),
        "--start-conf=manual",
        "--",
        "--auth-host=trust",
        "--auth-local=trust",
      ]);
      // Loopback only (set in conf.d: pg_createcluster -o mangles the quoting of an address).
      writeFileSync(
        `/etc/postgresql/${pgVersion()}/${CLUSTER}/conf.d/shardkit.conf`,
        "listen_addresses = '127.0.0.1'\n",
      );
    }
    if (s !== "online") await start();
  });
}

/** Stops shardb, runs `fn` while it is down, then starts it again (even when `fn` throws). */
export function withShardbStopped<T>(fn: () => Promise<T>): Promise<T> {
  return withLock(async () => {
    await run("pg_ctlcluster", ["--skip-systemctl-redirect", pgVersion(), CLUSTER, "stop"]);
    try {
      return await fn();
    } finally {
      await start();
    }
  });
}
