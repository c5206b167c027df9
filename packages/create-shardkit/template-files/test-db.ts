// PostgreSQL for the tests: databases on the server at 127.0.0.1:5432 (user postgres, trust
// authentication), and the extra servers (clusters) some tests stop, freeze or need with
// `wal_level = logical`. Extra servers are made with Debian's and Ubuntu's postgresql-common
// (`pg_createcluster`, `pg_ctlcluster`), which needs root or the postgres user. Where that is not
// available, `ensureCluster` rejects with a ClustersUnavailableError saying why, and the tests that
// need such a server are skipped with that reason. SHARDKIT_TEST_NO_CLUSTERS=1 asks for that too.
import { execFileSync } from "node:child_process";
import {
  accessSync,
  constants,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { delimiter, join } from "node:path";
import pg from "pg";

/** The port of the main PostgreSQL server. */
export const MAIN_PORT = 5432;
const LOCK_STALE_MS = 180_000;

export function pgUrl(port: number, database: string): string {
  return `postgresql://postgres@127.0.0.1:${port}/${database}`;
}

/** Thrown by `ensureCluster` where this machine does not let the tests make PostgreSQL servers. */
export class ClustersUnavailableError extends Error {
  readonly code = "CLUSTERS_UNAVAILABLE";
  override readonly name = "ClustersUnavailableError";
}

/** Why the tests cannot make PostgreSQL servers here, or undefined when they can. */
export function whyNoClusters(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.SHARDKIT_TEST_NO_CLUSTERS) return "SHARDKIT_TEST_NO_CLUSTERS is set";
  const found = (env.PATH ?? "").split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, "pg_createcluster"), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (!found)
    return "pg_createcluster is not installed (the postgresql-common package of Debian and Ubuntu provides it)";
  let v: string;
  try {
    v = version();
  } catch {
    return "no PostgreSQL under /etc/postgresql";
  }
  try {
    accessSync(`/etc/postgresql/${v}`, constants.W_OK);
  } catch {
    return `pg_createcluster needs root or the postgres user (this is uid ${process.getuid?.()})`;
  }
  return undefined;
}

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 });
}

function version(): string {
  const v = readdirSync("/etc/postgresql").sort().at(-1);
  if (!v) throw new Error("no PostgreSQL under /etc/postgresql");
  return v;
}

async function ready(port: number, timeoutMs = 30_000): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({
      connectionString: pgUrl(port, "postgres"),
      connectionTimeoutMillis: 1000,
    });
    try {
      await client.connect();
      await client.end();
      return true;
    } catch {
      await client.end().catch(() => {});
      if (Date.now() > until) return false;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Runs `fn` holding a lock directory per cluster, shared by every process on the machine. */
async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const dir = `/tmp/shardkit-pg-${name}.lock`;
  const until = Date.now() + 150_000;
  for (;;) {
    try {
      mkdirSync(dir);
      break;
    } catch {
      try {
        if (Date.now() - statSync(dir).mtimeMs > LOCK_STALE_MS) rmSync(dir, { recursive: true, force: true });
      } catch {}
      if (Date.now() > until) throw new Error(`timed out waiting for ${dir}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function state(name: string): "online" | "down" | "absent" {
  for (const line of sh("pg_lsclusters", ["--no-header"]).split("\n")) {
    const [v, cluster, , status] = line.trim().split(/\s+/);
    if (v === version() && cluster === name) return status === "online" ? "online" : "down";
  }
  return "absent";
}

async function start(name: string, port: number): Promise<void> {
  sh("pg_ctlcluster", ["--skip-systemctl-redirect", version(), name, "start"]);
  if (!(await ready(port))) throw new Error(`PostgreSQL cluster ${name} on port ${port} did not start`);
}

/**
 * A PostgreSQL server (cluster) `name` on 127.0.0.1:`port`: created if absent (trust authentication,
 * loopback only), started if down; `logical: true` sets `wal_level = logical`. `main` is the machine's
 * own server on MAIN_PORT: it must answer (or be startable here); its configuration is left alone.
 */
export async function ensureCluster(
  name = "main",
  port = MAIN_PORT,
  options: { logical?: boolean } = {},
): Promise<number> {
  if (name === "main") {
    if (await ready(port, 1000)) return port;
    const why = whyNoClusters();
    if (why)
      throw new Error(
        `PostgreSQL does not answer on 127.0.0.1:${port}: the tests need a server there (user postgres, trust authentication), and cannot start one: ${why}`,
      );
    await withLock(name, () => start(name, port));
    return port;
  }
  const why = whyNoClusters();
  if (why)
    throw new ClustersUnavailableError(
      `cannot make PostgreSQL server ${name} (port ${port}) for the tests: ${why}`,
    );
  await withLock(name, async () => {
    let current = state(name);
    if (current === "absent") {
      sh("pg_createcluster", [
        version(),
        name,
        "--port",
        String(port),
        "--start-conf=manual",
        "--",
        "--auth-host=trust",
        "--auth-local=trust",
      ]);
    }
    const conf = `/etc/postgresql/${version()}/${name}/conf.d/shardkit.conf`;
    const wanted = `listen_addresses = '127.0.0.1'\n${
      options.logical
        ? "wal_level = logical\nmax_replication_slots = 20\nmax_wal_senders = 20\nwal_retrieve_retry_interval = 100ms\n"
        : ""
    }`;
    let written = "";
    try {
      written = readFileSync(conf, "utf8");
    } catch {}
    if (written !== wanted) {
      writeFileSync(conf, wanted);
      if (current === "online") {
        sh("pg_ctlcluster", ["--skip-systemctl-redirect", version(), name, "stop", "-m", "fast"]);
        current = "down";
      }
    }
    if (current !== "online" || !(await ready(port, 1000))) await start(name, port);
  });
  return port;
}

/** Stops and drops a cluster the tests made (never `main`). */
export async function dropCluster(name: string): Promise<void> {
  if (name === "main") throw new Error("dropCluster: main is the machine's own server");
  await withLock(name, async () => {
    if (state(name) !== "absent") sh("pg_dropcluster", [version(), name, "--stop"]);
  });
}

/** Stops a cluster, runs `fn` while it is down, then starts it again (even when `fn` throws). */
export async function withClusterStopped<T>(name: string, port: number, fn: () => Promise<T>): Promise<T> {
  return withLock(name, async () => {
    sh("pg_ctlcluster", ["--skip-systemctl-redirect", version(), name, "stop", "-m", "fast"]);
    try {
      return await fn();
    } finally {
      await start(name, port);
    }
  });
}

/**
 * Freezes a cluster (SIGSTOP to its postmaster and every backend: connections stay open and hang,
 * as on a frozen machine), runs `fn`, then thaws it (SIGCONT), even when `fn` throws.
 */
export async function withClusterFrozen<T>(name: string, fn: () => Promise<T>): Promise<T> {
  return withLock(name, async () => {
    const dataDir = sh("pg_conftool", ["-s", version(), name, "show", "data_directory"]).trim();
    const postmaster = readFileSync(`${dataDir}/postmaster.pid`, "utf8").split("\n")[0]!.trim();
    const frozen = [postmaster, ...sh("pgrep", ["-P", postmaster]).split("\n").filter(Boolean)];
    for (const pid of frozen) process.kill(Number(pid), "SIGSTOP");
    try {
      return await fn();
    } finally {
      for (const pid of frozen) {
        try {
          process.kill(Number(pid), "SIGCONT");
        } catch {}
      }
    }
  });
}

async function admin(port: number, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: pgUrl(port, "postgres") });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Drops what logical replication left in or for a database: its subscriptions and its slots. */
async function dropReplication(port: number, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: pgUrl(port, "postgres") });
  await client.connect();
  try {
    const { rows: exists } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (exists.length === 0) return;
    const { rows: slots } = await client.query(
      "SELECT slot_name FROM pg_replication_slots WHERE database = $1",
      [name],
    );
    for (const { slot_name } of slots) {
      await client.query("SELECT pg_drop_replication_slot($1)", [slot_name]).catch(() => {});
    }
  } finally {
    await client.end();
  }
  const inside = new pg.Client({ connectionString: pgUrl(port, name) });
  await inside.connect();
  try {
    const { rows } = await inside.query(
      "SELECT subname FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
    );
    for (const { subname } of rows) {
      await inside.query(`ALTER SUBSCRIPTION "${subname}" DISABLE`).catch(() => {});
      await inside.query(`ALTER SUBSCRIPTION "${subname}" SET (slot_name = NONE)`).catch(() => {});
      await inside.query(`DROP SUBSCRIPTION "${subname}"`).catch(() => {});
    }
  } finally {
    await inside.end();
  }
}

/**
 * Creates a database (dropping a leftover of the same name): empty, with the "C" collation when
 * `collation: "C"`, or a copy of `template`. Returns its URL.
 */
export async function createDatabase(
  port: number,
  name: string,
  options: { collation?: "C"; template?: string } = {},
): Promise<string> {
  await dropReplication(port, name);
  await admin(port, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  const how = options.template
    ? ` TEMPLATE "${options.template}"`
    : options.collation === "C"
      ? ` TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`
      : "";
  await admin(port, `CREATE DATABASE "${name}"${how}`);
  return pgUrl(port, name);
}

export async function dropDatabase(port: number, name: string): Promise<void> {
  await dropReplication(port, name);
  await admin(port, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}
