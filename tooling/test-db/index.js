// Shard databases for tests: real PostgreSQL servers on this machine, one database per shard.
// Cluster management is idempotent and guarded by a lock directory per cluster, shared by every
// process on the machine, so test files of different packages never create, start or stop the
// same cluster at the same time.
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import pg from "pg";

export const MAIN_PORT = 5432;
const LOCK_STALE_MS = 180_000;

export function pgUrl(port, database) {
  return `postgresql://postgres@127.0.0.1:${port}/${database}`;
}

function sh(cmd, args) {
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 });
}

function version() {
  const versions = readdirSync("/etc/postgresql").sort();
  const v = versions[versions.length - 1];
  if (!v) throw new Error("no PostgreSQL under /etc/postgresql");
  return v;
}

async function ready(port, timeoutMs = 30_000) {
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

async function withLock(name, fn) {
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

function state(name) {
  for (const line of sh("pg_lsclusters", ["--no-header"]).split("\n")) {
    const [v, cluster, , status] = line.trim().split(/\s+/);
    if (v === version() && cluster === name) return status === "online" ? "online" : "down";
  }
  return "absent";
}

async function start(name, port) {
  sh("pg_ctlcluster", ["--skip-systemctl-redirect", version(), name, "start"]);
  if (!(await ready(port))) throw new Error(`PostgreSQL cluster ${name} on port ${port} did not start`);
}

/**
 * A PostgreSQL cluster `name` on 127.0.0.1:`port`: created if absent (trust auth, loopback only),
 * started if down. `main` on 5432 is the machine's own server.
 */
export async function ensureCluster(name = "main", port = MAIN_PORT, options = {}) {
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
    if (name === "main") {
      // The machine's own server: started if down, its configuration left alone.
      if (current !== "online" || !(await ready(port, 1000))) await start(name, port);
      return;
    }
    // Loopback only (in conf.d: pg_createcluster -o mangles the quoting of an address), and for
    // logical replication tests wal_level = logical with room for slots and senders.
    const conf = `/etc/postgresql/${version()}/${name}/conf.d/shardkit.conf`;
    const wanted = `listen_addresses = '127.0.0.1'\n${
      options.logical
        ? // wal_retrieve_retry_interval: how soon replication workers start again after one
          // stopped (5 s by default), which tests that create and drop subscriptions wait on.
          "wal_level = logical\nmax_replication_slots = 20\nmax_wal_senders = 20\nwal_retrieve_retry_interval = 100ms\n"
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

/** Stops and drops a cluster a test created (never `main`). */
export async function dropCluster(name) {
  if (name === "main") throw new Error("dropCluster: main is the machine's own server");
  await withLock(name, async () => {
    if (state(name) !== "absent") sh("pg_dropcluster", [version(), name, "--stop"]);
  });
}

/** Stops a cluster, runs `fn` while it is down, then starts it again (even when `fn` throws). */
export async function withClusterStopped(name, port, fn) {
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
export async function withClusterFrozen(name, fn) {
  return withLock(name, async () => {
    const dataDir = sh("pg_conftool", ["-s", version(), name, "show", "data_directory"]).trim();
    const postmaster = readFileSync(`${dataDir}/postmaster.pid`, "utf8").split("\n")[0].trim();
    const pids = () => [postmaster, ...sh("pgrep", ["-P", postmaster]).split("\n").filter(Boolean)];
    const frozen = pids();
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

async function admin(port, sql) {
  const client = new pg.Client({ connectionString: pgUrl(port, "postgres") });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * Drops a database with what logical replication left in it or for it: its subscriptions (their
 * slots on the source are dropped with them when the source answers) and its replication slots.
 */
async function dropReplication(port, name) {
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
 * `collation: "C"` (string order = code point order), or a copy of `template`.
 */
export async function createDatabase(port, name, options = {}) {
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

export async function dropDatabase(port, name) {
  await dropReplication(port, name);
  await admin(port, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}
