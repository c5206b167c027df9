// Shard databases for tests: real PostgreSQL servers on this machine, one database per shard, on
// the server at 127.0.0.1:5432 (user postgres, trust authentication), and the extra servers
// (clusters) some tests stop, freeze, replicate or need with `wal_level = logical`. Extra servers
// are made with Debian's and Ubuntu's postgresql-common (`pg_createcluster`, `pg_ctlcluster`),
// which needs root or the postgres user. Where that is not available, `ensureCluster` and
// `createStreamingReplica` reject with a ClustersUnavailableError saying why, and the tests that
// need such a server are skipped with that reason. SHARDKIT_TEST_NO_CLUSTERS=1 asks for that too.
// Cluster management is idempotent and guarded by a lock directory per cluster, shared by every
// process on the machine, so test processes never create, start or stop the same cluster at once.
//
// This file and index.d.ts are also every create-shardkit template's src/test/test-db.js and
// src/test/test-db.d.ts, copied unchanged when the templates are built: keep them free of
// anything that only exists in this repository.
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  accessSync,
  chmodSync,
  constants,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import pg from "pg";

export const MAIN_PORT = 5432;

/**
 * How much busier than idle this machine is now: the last minute's load average per core, at least
 * 1 and at most 10. A test's time limits are hang detectors, never speed claims: `patient(ms)`
 * scales a limit by it, so a machine whose cores other work keeps busy gives a slow answer the
 * time it needs instead of calling it absent.
 */
export function slowness() {
  return Math.min(10, Math.max(1, loadavg()[0] / availableParallelism()));
}

/**
 * `ms` (a test's time limit, or the timeout a test gives a server that is up) scaled by
 * `slowness()` now, rounded to whole milliseconds.
 */
export function patient(ms) {
  return Math.round(ms * slowness());
}

/**
 * `promise`, or a failure naming `what` once `patient(ms)` (scaled when the wait starts) has passed
 * without it settling: a hang detector for a test's wait on a server, a child process or an event,
 * never a speed claim.
 */
export function within(promise, ms, what) {
  const limit = patient(ms);
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${limit} ms`)), limit);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const LOCK_STALE_MS = 180_000;

export function pgUrl(port, database) {
  return `postgresql://postgres@127.0.0.1:${port}/${database}`;
}

/**
 * The extra PostgreSQL server a project's tests use, `{ cluster, port }`: `SHARDKIT_TEST_CLUSTER`
 * (`<name>:<port>`) when set; else a cluster named after the project's package name, on a port
 * derived from that name (15000-19999), so that two projects on one machine each get their own.
 * The port is the server's where it is shared (`testDatabases({ shared: true })`); a server of a
 * run's own (`ownCluster`, what `testDatabases` makes otherwise) is `<name>_<pid>` on a free port.
 */
export function testCluster(packageName, env = process.env) {
  const spec = env.SHARDKIT_TEST_CLUSTER;
  if (spec !== undefined) {
    const m = /^([a-z0-9_]{1,63}):(\d{1,5})$/.exec(spec);
    const port = Number(m?.[2]);
    if (!m || port < 1 || port > 65535)
      throw new Error(
        `SHARDKIT_TEST_CLUSTER=${JSON.stringify(spec)}: expected <name>:<port>, a cluster name of lowercase letters, digits and _ and a port from 1 to 65535`,
      );
    return { cluster: m[1], port };
  }
  // FNV-1a of the name: the same project gets the same server every run.
  let hash = 0x811c9dc5;
  for (const c of packageName) hash = Math.imul(hash ^ c.charCodeAt(0), 0x01000193) >>> 0;
  const slug = packageName
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "")
    .slice(0, 40);
  return {
    cluster: `sk_${slug}_${hash.toString(16).padStart(8, "0").slice(0, 6)}`,
    port: 15000 + (hash % 5000),
  };
}

/** Thrown where this machine does not let the tests make PostgreSQL servers (code CLUSTERS_UNAVAILABLE). */
export class ClustersUnavailableError extends Error {
  code = "CLUSTERS_UNAVAILABLE";
  name = "ClustersUnavailableError";
}

/** Why the tests cannot make PostgreSQL servers here, or undefined when they can. */
export function whyNoClusters(env = process.env) {
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
  let v;
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

/** Throws ClustersUnavailableError when this machine does not let the tests make the `what` (server, replica) `name`. */
function requireClusters(what, name, port) {
  const why = whyNoClusters();
  if (why)
    throw new ClustersUnavailableError(
      `cannot make PostgreSQL ${what} ${name} (port ${port}) for the tests: ${why}`,
    );
}

/**
 * A new cluster `name` on `port` (trust auth for host and local connections, loopback only), not
 * started. Its `conf.d/shardkit.conf` marks it as made here (see `refuseForeign`).
 */
function createCluster(name, port) {
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
  writeFileSync(confOf(name), "listen_addresses = '127.0.0.1'\n");
}

/** The configuration file these helpers write in every cluster they make. */
function confOf(name) {
  return `/etc/postgresql/${version()}/${name}/conf.d/shardkit.conf`;
}

/**
 * Throws when a cluster `name` exists that these helpers did not make (it has no
 * `conf.d/shardkit.conf`): the tests never reconfigure, stop or drop a server that is not theirs.
 */
function refuseForeign(name, port) {
  if (state(name) === "absent") return;
  try {
    statSync(confOf(name));
  } catch {
    throw new Error(
      `PostgreSQL cluster ${name} exists and was not made by these tests (it has no conf.d/shardkit.conf): they never change, stop or drop a server they did not make; give the tests a cluster name and port of their own${port ? ` (not ${name}:${port})` : ""}`,
    );
  }
}

function sh(cmd, args) {
  return execFileSync(cmd, args, {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: patient(60_000),
  });
}

function version() {
  const versions = readdirSync("/etc/postgresql").sort();
  const v = versions[versions.length - 1];
  if (!v) throw new Error("no PostgreSQL under /etc/postgresql");
  return v;
}

/**
 * Whether a server answers on `port` within `timeoutMs` (scaled by `patient`: a new backend on a
 * machine whose cores are busy can take seconds to answer, and that is slow, not absent). A refused
 * connection (nothing listening) is retried at once until then.
 */
async function ready(port, timeoutMs = 30_000) {
  const until = Date.now() + patient(timeoutMs);
  for (;;) {
    const client = new pg.Client({
      connectionString: pgUrl(port, "postgres"),
      connectionTimeoutMillis: patient(3000),
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
  // This cluster only: listing every cluster fails while another run creates or drops one of its own.
  let line;
  try {
    line = sh("pg_lsclusters", ["--no-header", version(), name]);
  } catch (error) {
    if (/does not exist/.test(String(error.stderr))) return "absent";
    if (error.code === "ENOENT") return "absent"; // no PostgreSQL or no postgresql-common: no cluster
    throw error;
  }
  return line.trim().split(/\s+/)[3] === "online" ? "online" : "down";
}

async function start(name, port) {
  sh("pg_ctlcluster", ["--skip-systemctl-redirect", version(), name, "start"]);
  if (!(await ready(port)))
    throw new Error(`PostgreSQL cluster ${name} on port ${port} was started but did not answer in time`);
}

/**
 * `settings` (`{ max_prepared_transactions: 20 }`) as lines of postgresql.conf, in the order given.
 * Names are lowercase letters, digits and _; values are numbers, booleans or strings (quoted).
 */
function settingLines(settings = {}) {
  return Object.entries(settings)
    .map(([name, value]) => {
      if (!/^[a-z_][a-z0-9_.]*$/.test(name))
        throw new Error(`ensureCluster: setting ${JSON.stringify(name)} is not a setting name`);
      const text = typeof value === "string" ? `'${value.replaceAll("'", "''")}'` : String(value);
      return `${name} = ${text}\n`;
    })
    .join("");
}

/**
 * A PostgreSQL server (cluster) `name` on 127.0.0.1:`port`: created if absent (trust authentication,
 * loopback only), started if down; `logical: true` sets `wal_level = logical`, `settings` any other
 * server settings (restarting it once when they changed). `main` is the machine's
 * own server on MAIN_PORT: it must answer (or be startable here); it is never created and its
 * configuration is left alone.
 */
export async function ensureCluster(name = "main", port = MAIN_PORT, options = {}) {
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
  requireClusters("server", name, port);
  await withLock(name, async () => {
    refuseForeign(name, port);
    let current = state(name);
    if (current === "absent") {
      createCluster(name, port);
    }
    // Loopback only (in conf.d: pg_createcluster -o mangles the quoting of an address), and for
    // logical replication tests wal_level = logical with room for slots and senders.
    const conf = confOf(name);
    const wanted = `listen_addresses = '127.0.0.1'\n${
      options.maxConnections ? `max_connections = ${Math.floor(options.maxConnections)}\n` : ""
    }${options.preload?.length ? `shared_preload_libraries = '${options.preload.join(",")}'\n` : ""}${settingLines(
      options.settings,
    )}${
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

/** Runs a PostgreSQL client program as the postgres user (when run as root: the data files are its). */
function asPostgres(cmd, args) {
  return process.getuid?.() === 0 ? sh("runuser", ["-u", "postgres", "--", cmd, ...args]) : sh(cmd, args);
}

async function query(port, sql) {
  const client = new pg.Client({ connectionString: pgUrl(port, "postgres"), connectionTimeoutMillis: 1000 });
  try {
    await client.connect();
    return (await client.query(sql)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Polls `check` (every 100 ms) until it returns true, for at most `timeoutMs`; errors count as not yet.
 * Returns false on timeout.
 */
async function until(check, timeoutMs) {
  const deadline = Date.now() + patient(timeoutMs);
  for (;;) {
    try {
      if (await check()) return true;
    } catch {}
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A streaming replica `name` on 127.0.0.1:`port` of the running cluster on `primaryPort`, made
 * afresh: a leftover of the same name is dropped, a cluster is created for its configuration, its
 * data directory is replaced by `pg_basebackup -R -X stream` of the primary (as the postgres user
 * when run as root; the primary's pg_hba allows replication from loopback, as initdb's does), and
 * it is started. Resolves once the primary reports it `streaming` and it answers as a standby,
 * within `timeoutMs` (default 60 s, scaled by `patient`).
 */
export async function createStreamingReplica(name, port, { primaryPort, timeoutMs = 60_000 }) {
  if (name === "main") throw new Error("createStreamingReplica: main is the machine's own server");
  requireClusters("replica", name, port);
  await withLock(name, async () => {
    refuseForeign(name, port);
    if (state(name) !== "absent") sh("pg_dropcluster", [version(), name, "--stop"]);
    rmSync(`/etc/postgresql/${version()}/${name}`, { recursive: true, force: true });
    createCluster(name, port);
    const dataDir = sh("pg_conftool", ["-s", version(), name, "show", "data_directory"]).trim();
    for (const entry of readdirSync(dataDir)) rmSync(`${dataDir}/${entry}`, { recursive: true, force: true });
    asPostgres("pg_basebackup", [
      "-h",
      "127.0.0.1",
      "-p",
      String(primaryPort),
      "-U",
      "postgres",
      "-D",
      dataDir,
      "-R",
      "-X",
      "stream",
      // At once: a spread checkpoint (the default) paces the primary's dirty buffers over minutes
      // (checkpoint_completion_target of checkpoint_timeout), past this helper's time limit.
      "--checkpoint=fast",
    ]);
    writeFileSync(confOf(name), "listen_addresses = '127.0.0.1'\n");
    await start(name, port);
  });
  const applicationName = `${version()}/${name}`; // cluster_name, which the WAL receiver reports
  const streaming = await until(async () => {
    const [standby] = await query(port, "SELECT pg_is_in_recovery() AS recovery");
    const senders = await query(
      primaryPort,
      `SELECT state FROM pg_stat_replication WHERE application_name = '${applicationName}'`,
    );
    return standby?.recovery === true && senders.some((s) => s.state === "streaming");
  }, timeoutMs);
  if (!streaming)
    throw new Error(`replica ${name} on port ${port} is not streaming from port ${primaryPort}`);
  return port;
}

/**
 * Waits until the standby on `port` has replayed everything the primary on `primaryPort` had
 * written when called (its WAL position then), within `timeoutMs` (default 30 s, scaled by `patient`).
 */
export async function waitForReplay(port, primaryPort, timeoutMs = 30_000) {
  const [{ lsn }] = await query(primaryPort, "SELECT pg_current_wal_lsn()::text AS lsn");
  const replayed = await until(async () => {
    const [row] = await query(port, `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS done`);
    return row?.done === true;
  }, timeoutMs);
  if (!replayed)
    throw new Error(`standby on port ${port} did not replay up to ${lsn} within patient(${timeoutMs}) ms`);
}

/** When process `pid` started (Linux: field 22 of /proc/<pid>/stat), or "" where that cannot be read. */
function startedAt(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? "";
  } catch {
    return "";
  }
}

/**
 * Runs the steps of a setup (a vitest global setup's, ...) so that a failure leaves nothing made:
 * `fn(step)` makes each thing through `step(made, undo)` (`made` the thing or a promise of it, `undo`
 * what unmakes it, given the thing), which resolves to the thing. Resolves to the teardown, which
 * undoes every step in reverse order (all of them, even when one fails). When `fn` throws, the steps
 * it started are awaited, those that made their thing are undone in reverse order, and then the error
 * propagates (its message saying so when an undo failed too).
 */
export async function undoable(fn) {
  const started = [];
  const undos = [];
  const undoAll = async () => {
    const failures = [];
    for (const undo of undos.splice(0).reverse()) {
      try {
        await undo();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1) throw new AggregateError(failures, `${failures.length} undos failed`);
  };
  const step = (made, undo) => {
    const done = Promise.resolve(made).then((thing) => {
      undos.push(() => undo(thing));
      return thing;
    });
    started.push(done);
    return done;
  };
  try {
    await fn(step);
  } catch (error) {
    await Promise.allSettled(started);
    try {
      await undoAll();
    } catch (undoError) {
      // The setup's error still (its class and code), saying what was left behind.
      if (error instanceof Error)
        error.message += ` (and undoing what it had made failed: ${undoError?.message ?? undoError})`;
    }
    throw error;
  }
  return undoAll;
}

/** Where `shareClusters` says which keys share a cluster: an empty file `<SHARED>/<cluster>@<key>` each. */
const SHARED = "/tmp/shardkit-shared";

/** The folder of the users of the clusters shared under `key`: one file per process, named by its pid. */
function usersDir(key) {
  return `/tmp/shardkit-users-${key}`;
}

/** The processes that use the clusters shared under `key` (alive or not, per its start time): `{ pid, live }`. */
function usersOf(key) {
  let pids = [];
  try {
    pids = readdirSync(usersDir(key));
  } catch {}
  return pids.map((pid) => {
    let started = "";
    try {
      started = readFileSync(`${usersDir(key)}/${pid}`, "utf8").trim();
    } catch {}
    return { pid: Number(pid), live: running(Number(pid), started) };
  });
}

/**
 * Clusters several test processes use at once, `clusters` by name: the first live user makes them
 * (`make`), the last to release drops them (`drop`). Returns this process's release. Users are pid
 * files holding the process's start time; the file of a process that is dead, or whose pid a later
 * process took, is ignored, so a crashed run does not keep them forever. Each of `clusters` is
 * recorded as shared under `key`, so that no other run stops or freezes it (`refuseShared`). A
 * `make` that fails is undone (`drop`) before its error propagates.
 */
export async function shareClusters(key, { clusters, make, drop }) {
  if (!Array.isArray(clusters))
    throw new Error(
      `shareClusters(${JSON.stringify(key)}): name the clusters make() makes ({ clusters: [...] })`,
    );
  const dir = usersDir(key);
  const live = () => {
    mkdirSync(dir, { recursive: true });
    return usersOf(key).filter(({ pid, live }) => {
      if (pid !== process.pid && live) return true;
      rmSync(`${dir}/${pid}`, { force: true });
      return false;
    });
  };
  await withLock(`users-${key}`, async () => {
    if (live().length === 0)
      await undoable(async (step) => {
        await step(undefined, () => drop()); // the undo of a make() that fails part-way
        await make();
      });
    mkdirSync(SHARED, { recursive: true });
    for (const cluster of clusters) writeFileSync(`${SHARED}/${cluster}@${key}`, "");
    writeFileSync(`${dir}/${process.pid}`, startedAt(process.pid));
  });
  return () =>
    withLock(`users-${key}`, async () => {
      rmSync(`${dir}/${process.pid}`, { force: true });
      if (live().length > 0) return;
      await drop();
      for (const cluster of clusters) rmSync(`${SHARED}/${cluster}@${key}`, { force: true });
    });
}

/**
 * One cluster several test processes share (`shareClusters`): made by `ensureCluster(name, port,
 * options)` for the first live user, dropped by the last to release. Returns this process's release.
 */
export function shareCluster(name, port, options = {}) {
  return shareClusters(`cluster-${name}`, {
    clusters: [name],
    make: async () => {
      await ensureCluster(name, port, options);
    },
    drop: () => dropCluster(name),
  });
}

/**
 * Stops and drops a cluster a test created (never `main`, never one these helpers did not make),
 * its configuration folder included.
 */
export async function dropCluster(name) {
  if (name === "main") throw new Error("dropCluster: main is the machine's own server");
  await withLock(name, async () => {
    if (state(name) === "absent") return;
    refuseForeign(name);
    sh("pg_dropcluster", [version(), name, "--stop"]);
    // pg_dropcluster leaves the configuration folder when it holds a file of ours (conf.d/shardkit.conf).
    rmSync(`/etc/postgresql/${version()}/${name}`, { recursive: true, force: true });
  });
}

const OWNERS = "/tmp/shardkit-own";

/** Whether process `pid` runs, and is the one that started at `started` ("": not known). */
function running(pid, started) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if (err.code !== "EPERM") return false;
  }
  return started === "" || startedAt(pid) === started;
}

/** This process and its ancestors, by pid (Linux: /proc/<pid>/stat's fourth field). */
function lineage() {
  const pids = new Set([process.pid]);
  for (let pid = process.ppid; pid > 1 && !pids.has(pid); ) {
    pids.add(pid);
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      pid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    } catch {
      break;
    }
  }
  return pids;
}

let ownMade = 0;

/**
 * A PostgreSQL server of this process's own (and its children's: a vitest run's workers), which its
 * tests may stop and freeze: cluster `<base>_<pid>` (`_<n>` after it for this process's n-th server)
 * on a port nothing listens on now and no other run's server has, made here and shared with no other
 * run. `options` as `ensureCluster`'s. Servers of runs that ended without dropping theirs are dropped
 * first. Resolves to `{ cluster, port, drop }`; `drop()` drops it.
 */
export function ownCluster(base, options = {}) {
  return own(base, (cluster, port) => ensureCluster(cluster, port, options));
}

/**
 * A streaming replica of this process's own of the running cluster on `primaryPort`, which its tests
 * may stop: as `ownCluster` (`<base>_<pid>...` on a free port), made by `createStreamingReplica`.
 */
export function ownReplica(base, { primaryPort, timeoutMs }) {
  return own(base, (cluster, port) => createStreamingReplica(cluster, port, { primaryPort, timeoutMs }));
}

/** `ownCluster` and `ownReplica`: the name, the owner's record, a free port, `make(cluster, port)`. */
async function own(base, make) {
  ownMade += 1;
  const cluster = `${base.slice(0, 40)}_${process.pid}${ownMade > 1 ? `_${ownMade}` : ""}`;
  requireClusters("server", cluster, 0);
  mkdirSync(OWNERS, { recursive: true });
  const taken = new Set(); // the ports of live runs' servers: free while one is stopped, never reused
  for (const name of readdirSync(OWNERS)) {
    const [pid, started, port] = readOwner(name);
    if (running(pid, started)) taken.add(port);
    else await dropLeftover(name);
  }
  const drop = async () => {
    await dropCluster(cluster);
    rmSync(`${OWNERS}/${cluster}`, { force: true });
  };
  for (let attempt = 1; ; attempt++) {
    const port = await serverPort(taken);
    writeFileSync(`${OWNERS}/${cluster}`, `${process.pid} ${startedAt(process.pid)} ${port}\n`);
    try {
      await make(cluster, port);
      return { cluster, port, drop };
    } catch (error) {
      await dropCluster(cluster).catch(() => {}); // its port was taken meanwhile: another
      if (attempt >= 3 || error?.code === "CLUSTERS_UNAVAILABLE") {
        rmSync(`${OWNERS}/${cluster}`, { force: true });
        throw error;
      }
    }
  }
}

/**
 * Drops the server of a run that ended without dropping it (thawed first: a run killed while it held
 * its server frozen leaves it stopped, and a stopped postmaster cannot be shut down), and forgets it
 * only once it is gone: a drop that fails now is tried again by the next `ownCluster`.
 */
async function dropLeftover(name) {
  try {
    const postmaster = postmasterOf(name);
    for (const pid of [postmaster, ...childrenOf(postmaster)]) process.kill(Number(pid), "SIGCONT");
  } catch {} // not running, or gone already
  try {
    await dropCluster(name);
    rmSync(`${OWNERS}/${name}`, { force: true });
  } catch {}
}

/**
 * A port for a server of a run's own: free now, not one of `taken`, and below the range the system
 * gives outgoing connections their local ports from (`ip_local_port_range`), so that no connection
 * takes it while the server is stopped and its restart finds it free; above testCluster's 15000-19999.
 */
export async function serverPort(taken = new Set()) {
  let low = 32768;
  try {
    low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  } catch {}
  if (!(low > 20_100)) return listenOnce(0); // no room below the range: whatever the system gives
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * (low - 20_000));
    if (!taken.has(port) && (await listenOnce(port)) !== null) return port;
  }
}

/**
 * Listens on 127.0.0.1:`port` (0: a port the system picks) and closes again at once: the port it
 * listened on, or null when something else listens there now. Rejects when the system refuses to
 * listen at all (out of file descriptors, ...): that is no answer about the port.
 */
async function listenOnce(port) {
  const server = createServer();
  const bound = await new Promise((resolve, reject) => {
    server.once("error", (error) => (error.code === "EADDRINUSE" ? resolve(null) : reject(error)));
    server.listen(port, "127.0.0.1", () => resolve(server.address().port));
  });
  if (bound !== null) await new Promise((resolve) => server.close(resolve));
  return bound;
}

/** The pid of cluster `name`'s postmaster (its data directory's `postmaster.pid`). */
function postmasterOf(name) {
  const dataDir = sh("pg_conftool", ["-s", version(), name, "show", "data_directory"]).trim();
  return readFileSync(`${dataDir}/postmaster.pid`, "utf8").split("\n")[0].trim();
}

/** The pids of process `parent`'s children ([] when it has none). */
function childrenOf(parent) {
  try {
    return sh("pgrep", ["-P", parent]).split("\n").filter(Boolean);
  } catch (error) {
    if (error.status !== 1) throw error; // 1: no children
    return [];
  }
}

/** The process that made cluster `name` with `ownCluster`, and its port: `[pid, started, port]`, or `[0, "", 0]`. */
function readOwner(name) {
  try {
    const [pid, started = "", port] = readFileSync(`${OWNERS}/${name}`, "utf8").trim().split(" ");
    return [Number(pid), started, Number(port)];
  } catch {
    return [0, "", 0];
  }
}

/**
 * Throws unless this process may stop or freeze cluster `name`: never one another run uses, whether
 * made for another process (`ownCluster`) or shared (`shareClusters` under any key that names it,
 * as `shareCluster` and `testDatabases({ shared })` do) with a process that runs outside this one's
 * line (this process and its parents).
 */
function refuseShared(name, what) {
  const mine = lineage();
  const [owner, started] = readOwner(name);
  const others = owner && !mine.has(owner) && running(owner, started) ? [owner] : [];
  let shared = [];
  try {
    shared = readdirSync(SHARED).filter((entry) => entry.startsWith(`${name}@`));
  } catch {}
  for (const entry of shared)
    for (const { pid, live } of usersOf(entry.slice(name.length + 1)))
      if (live && !mine.has(pid)) others.push(pid);
  if (others.length > 0)
    throw new Error(
      `${what} PostgreSQL cluster ${name} refused: another test run uses it (process ${others.join(", ")}); a test stops or freezes only a server of its own run (ownCluster)`,
    );
}

/**
 * Stops a cluster, runs `fn` while it is down, then starts it again (even when `fn` throws). Refused
 * (before anything stops) for a cluster that another run uses: see `ownCluster`.
 */
export async function withClusterStopped(name, port, fn) {
  refuseShared(name, "stopping"); // at once: a server another run holds stopped keeps its lock meanwhile
  return withLock(name, async () => {
    refuseShared(name, "stopping");
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
 * as on a frozen machine), runs `fn`, then thaws it (SIGCONT), even when `fn` throws. Refused, as
 * `withClusterStopped`, for a cluster that another run uses.
 */
export async function withClusterFrozen(name, fn) {
  refuseShared(name, "freezing"); // at once: a server another run holds stopped keeps its lock meanwhile
  return withLock(name, async () => {
    refuseShared(name, "freezing");
    const postmaster = postmasterOf(name);
    const signal = (pid, sig) => {
      try {
        process.kill(Number(pid), sig);
        return true;
      } catch (error) {
        if (error.code === "ESRCH") return false; // a backend that ended meanwhile
        throw error;
      }
    };
    const frozen = [];
    const thaw = () => {
      for (const pid of frozen) {
        try {
          process.kill(Number(pid), "SIGCONT");
        } catch {}
      }
    };
    try {
      // The postmaster first: stopped, it starts no process, so the list of its children is whole.
      if (signal(postmaster, "SIGSTOP")) frozen.push(postmaster);
      for (const pid of childrenOf(postmaster)) if (signal(pid, "SIGSTOP")) frozen.push(pid);
    } catch (error) {
      thaw();
      throw error;
    }
    try {
      return await fn();
    } finally {
      thaw();
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

/**
 * The databases of a test run: `names` on the machine's server, `onServer` on a PostgreSQL server
 * named after `server` (a `testCluster(...)`), with `wal_level = logical` when `logical`: the run's
 * own (`ownCluster`: `<server.cluster>_<pid>` on a free port, made for the run, dropped after it,
 * and the only kind a test may stop or freeze). `shared: true` uses `server` itself instead, shared
 * with the project's other test processes running at once (`shareClusters`: the last one drops it).
 * Where this machine does not let the tests make a server (`ClustersUnavailableError`), `skipped`
 * says why and nothing is made, or, with `fallback: true`, the server's databases go on the main
 * server. Resolves to `{ urls, skipped, server, drop }`: each database's URL in the order given
 * (main's first), the server used (`{ cluster, port }`), and `drop()`, which drops every database and
 * the server the run made (only those).
 */
export async function testDatabases({
  names = [],
  onServer = [],
  server,
  logical = false,
  shared = false,
  fallback = false,
}) {
  let skipped = "";
  let made = server;
  let urls = [];
  const drop = await undoable(async (step) => {
    if (onServer.length > 0) {
      try {
        if (shared)
          await step(shareCluster(server.cluster, server.port, { logical }), (release) => release());
        else {
          const own = await step(ownCluster(server.cluster, { logical }), (own) => own.drop());
          made = { cluster: own.cluster, port: own.port };
        }
      } catch (err) {
        if (err?.code !== "CLUSTERS_UNAVAILABLE") throw err;
        skipped = err.message;
      }
    }
    if (skipped && !fallback) return;
    const extraPort = skipped ? MAIN_PORT : made.port;
    const dbs = [
      ...names.map((name) => ({ port: MAIN_PORT, name })),
      ...onServer.map((name) => ({ port: extraPort, name })),
    ];
    urls = await Promise.all(
      dbs.map((db) =>
        step(createDatabase(db.port, db.name), () => dropDatabase(db.port, db.name).catch(() => {})),
      ),
    );
  });
  return { urls, skipped, server: made, drop };
}

/**
 * The shards of a service's test run, for a vitest global setup: four shards in two groups on
 * three databases of `testDatabases` (`sk_<service>_a|b|c_<pid>`): 0/0 and 0/1 on a, 1/0 on b,
 * 1/1 on c, which lives on a server of the run's own named after `server` (the tests stop and
 * freeze it: it is shared with no other run) or, where no server may be made, on the main server
 * (`skipped` says why, and a warning, for the tests that stop that server to skip themselves).
 * Resolves to `{ shardsJson, skipped, server, drop }`: `shardsJson` in the SHARDKIT_SHARDS format,
 * `server` the second server's `{ cluster, port }`.
 */
export async function shardsOfRun(service, server) {
  await ensureCluster("main", MAIN_PORT);
  const db = (k) => `sk_${service}_${k}_${process.pid}`;
  const run = await testDatabases({
    names: [db("a"), db("b")],
    onServer: [db("c")],
    server,
    fallback: true,
  });
  if (run.skipped) console.warn(`skipping the tests that stop a second PostgreSQL server: ${run.skipped}`);
  const [a, b, c] = run.urls;
  const shardsJson = JSON.stringify([
    { group: 0, member: 0, url: a },
    { group: 0, member: 1, url: a },
    { group: 1, member: 0, url: b },
    { group: 1, member: 1, url: c },
  ]);
  return { shardsJson, skipped: run.skipped, server: run.server, drop: run.drop };
}

/**
 * A Prisma schema file a project keeps as a copy of @shardkit/prisma's (its outbox models, ...):
 * the project's `prisma/schema/<file>` and the installed `node_modules/@shardkit/prisma/schema/<file>`,
 * as text (`{ ours, upstream }`), for a test to expect them equal. `projectDir`: the project's
 * folder as a file URL ending in `/` (`new URL("..", import.meta.url)` from `src/`).
 */
export function copiedSchema(projectDir, file) {
  const read = (path) => readFileSync(new URL(path, projectDir), "utf8");
  return {
    ours: read(`prisma/schema/${file}`),
    upstream: read(`node_modules/@shardkit/prisma/schema/${file}`),
  };
}

/**
 * A service's vitest global setup (its `export default`): the run's shards (`shardsOfRun(service,
 * server)`) made before the tests, given to them as `inject("shardsJson")` (SHARDKIT_SHARDS JSON),
 * `inject("second")` (the run's own second server, `{ cluster, port }`, which they stop and freeze)
 * and `inject("secondSkipped")` (why the tests that stop or freeze it are skipped; "" when they
 * run), and dropped after the last test.
 */
export function shardsOfRunSetup(service, server) {
  return (project) =>
    undoable(async (step) => {
      const run = await step(shardsOfRun(service, server), (run) => run.drop());
      project.provide("shardsJson", run.shardsJson);
      project.provide("second", run.server);
      project.provide("secondSkipped", run.skipped);
    });
}

/**
 * Every row of `model` (a Prisma client's model property, such as "wallet") on every database of a
 * shard registry, for a test to check what was written and where nothing was.
 */
export async function everyRow(registry, model) {
  const rows = [];
  for (const physical of registry.databases) rows.push(...(await physical.client[model].findMany()));
  return rows;
}

/**
 * A test's HTTP client of a Fastify app, over `inject` (no socket): `http(method, url, body, key,
 * token)` sends `body` as JSON with `Idempotency-Key: <key>` (default a new UUID; null: none) and
 * `Authorization: Bearer <token>` (default the `token` given here; null: none), and resolves to
 * `{ status, body, headers }`, the body parsed from JSON.
 */
export function httpClient(app, { token = null } = {}) {
  return async (method, url, body, key = randomUUID(), as = token) => {
    const headers = {};
    if (key) headers["idempotency-key"] = key;
    if (as) headers.authorization = `Bearer ${as}`;
    const response = await app.inject({
      method,
      url,
      headers,
      ...(body === undefined ? {} : { payload: body }),
    });
    return { status: response.statusCode, body: response.json(), headers: response.headers };
  };
}

/**
 * Runs a TypeScript program of the project (`node --import tsx <file>` in `cwd`) in a process group
 * of its own and resolves to what it printed (rejects, with its output, when it fails). `env` is
 * added to this process's environment (a key set to `undefined` is removed from it). The group is
 * killed (SIGKILL) when `signal` (the test's: it aborts when the test times out or is cancelled)
 * aborts, and when the program ends: nothing it started outlives it.
 */
export function runProgram(file, { cwd, env = {}, signal } = {}) {
  const merged = { ...process.env, ...env };
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete merged[key];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", file], {
      cwd,
      env: merged,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk) => {
      stderr += chunk;
    });
    const killGroup = () => {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {} // the group has ended
    };
    signal?.addEventListener("abort", killGroup, { once: true });
    if (signal?.aborted) killGroup();
    child.on("error", reject);
    child.on("close", (code, killedBy) => {
      signal?.removeEventListener("abort", killGroup);
      killGroup();
      if (code === 0) return resolve(stdout);
      const error = new Error(
        `${file} ended with ${killedBy ?? `exit code ${code}`}:\n${stderr.slice(-4000)}`,
      );
      reject(Object.assign(error, { stdout, stderr }));
    });
  });
}

/** Where PgBouncer's binary is on this machine (Debian's `pgbouncer` package), or undefined. */
export function pgBouncerPath() {
  for (const dir of ["/usr/sbin", "/usr/bin", ...(process.env.PATH ?? "").split(delimiter)]) {
    try {
      accessSync(join(dir, "pgbouncer"), constants.X_OK);
      return join(dir, "pgbouncer");
    } catch {}
  }
  return undefined;
}

/**
 * `fn` with a connection of its own to the database at `url`, closed after (also when `fn` throws),
 * so no test leaves a connection behind on a database it drops.
 */
export async function withClient(url, fn) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * A PgBouncer of the test's own on 127.0.0.1 in front of the server on `targetPort` (every
 * database, user postgres, no authentication), in `mode` (default `transaction`) with at most
 * `poolSize` server connections per database, on a port nothing else listens on (the system picks
 * it; taken in between, another is picked). Resolves once it answers; `stop()` ends it (only it) and
 * removes its folder. As root it runs as the postgres user (PgBouncer refuses to run as root).
 */
export async function startPgBouncer({ targetPort = MAIN_PORT, poolSize = 2, mode = "transaction" } = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startPgBouncerOn(await listenOnce(0), { targetPort, poolSize, mode });
    } catch (error) {
      if (attempt >= 5) throw error;
    }
  }
}

async function startPgBouncerOn(port, { targetPort, poolSize, mode }) {
  const binary = pgBouncerPath();
  if (!binary) throw new Error("PgBouncer is not installed (Debian: apt-get install -y pgbouncer)");
  const dir = join(tmpdir(), `sk-pgbouncer-${port}-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { mode: 0o777 });
  chmodSync(dir, 0o777);
  const ini = join(dir, "pgbouncer.ini");
  writeFileSync(
    ini,
    [
      "[databases]",
      `* = host=127.0.0.1 port=${targetPort} user=postgres`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = any",
      `pool_mode = ${mode}`,
      `default_pool_size = ${poolSize}`,
      "max_client_conn = 500",
      `logfile = ${join(dir, "pgbouncer.log")}`,
      `pidfile = ${join(dir, "pgbouncer.pid")}`,
      "",
    ].join("\n"),
    { mode: 0o644 },
  );
  const asRoot = process.getuid?.() === 0;
  const child = spawn(binary, [...(asRoot ? ["-u", "postgres"] : []), ini], { stdio: "ignore" });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  // Answered, and by it: a PgBouncer that could not take the port exits (whoever else answers
  // there); one that took it says so in its log.
  const listening = () => {
    try {
      return readFileSync(join(dir, "pgbouncer.log"), "utf8").includes(`listening on 127.0.0.1:${port}`);
    } catch {
      return false;
    }
  };
  const up =
    (await Promise.race([ready(port, 30_000), exited.then(() => false)])) &&
    child.exitCode === null &&
    listening();
  if (!up) {
    let log = "";
    try {
      log = readFileSync(join(dir, "pgbouncer.log"), "utf8").trim().split("\n").slice(-3).join("\n");
    } catch {}
    await stop();
    throw new Error(`PgBouncer on port ${port} did not start${log ? `: ${log}` : ""}`);
  }
  return { port, url: (database) => pgUrl(port, database), stop };
}
