// Shard databases for tests: real PostgreSQL servers on this machine, one database per shard.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmdirSync } from "node:fs";
import pg from "pg";

export const MAIN_PORT = 5432;

export function pgUrl(port, database) {
  return `postgresql://postgres@127.0.0.1:${port}/${database}`;
}

function sh(cmd, args) {
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

async function ready(port, tries = 60) {
  for (let i = 0; i < tries; i++) {
    const client = new pg.Client({ connectionString: pgUrl(port, "postgres"), connectionTimeoutMillis: 1000 });
    try {
      await client.connect();
      await client.end();
      return true;
    } catch {
      await client.end().catch(() => {});
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  return false;
}

function version() {
  return sh("ls", ["/etc/postgresql"]).trim().split("\n")[0];
}

async function withLock(name, fn) {
  const dir = `/tmp/shardkit-${name}.lock`;
  for (let i = 0; ; i++) {
    try {
      mkdirSync(dir);
      break;
    } catch {
      if (i > 600) throw new Error(`timed out waiting for ${dir}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    rmdirSync(dir);
  }
}

/**
 * A PostgreSQL cluster `name` listening on 127.0.0.1:`port`, created (trust auth) if it does not
 * exist and started if it is down. `main` on 5432 is the machine's own server.
 */
export async function ensureCluster(name = "main", port = MAIN_PORT) {
  await withLock(`cluster-${name}`, async () => {
    const v = version();
    const listed = sh("pg_lsclusters", ["--no-header"]);
    const line = listed.split("\n").find((l) => l.split(/\s+/)[1] === name);
    if (!line) {
      sh("pg_createcluster", [v, name, "--port", String(port), "--", "--auth=trust"]);
    }
    if (!(await ready(port, 1))) {
      sh("pg_ctlcluster", ["--skip-systemctl-redirect", v, name, "start"]);
      if (!(await ready(port))) throw new Error(`PostgreSQL cluster ${name} on port ${port} did not start`);
    }
  });
  return port;
}

/** Stops or starts a cluster (for "a shard's server is down" tests). */
export async function setClusterRunning(name, port, running) {
  const v = version();
  sh("pg_ctlcluster", ["--skip-systemctl-redirect", v, name, running ? "start" : "stop", ...(running ? [] : ["-m", "fast"])]);
  if (running && !(await ready(port))) throw new Error(`PostgreSQL cluster ${name} did not restart`);
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

/** Creates an empty database (dropping a leftover of the same name). */
export async function createDatabase(port, name) {
  await admin(port, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await admin(port, `CREATE DATABASE "${name}"`);
  return pgUrl(port, name);
}

export async function dropDatabase(port, name) {
  await admin(port, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}
