// A fleet of the size the partition map is for, on a PostgreSQL server of its own: N databases with
// the test schema (made from one template: a schema push per database would take most of a run),
// and router processes (`fleet-opener.ts`), each with clients of its own, that open their maps over
// every database at the same moment. Used by the fleet test and the scale benches of this package.
import { spawn } from "node:child_process";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { createShardRegistry } from "@shardkit/prisma";
import { overSharedPool } from "@shardkit/prisma/internal";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import {
  createDatabase,
  dropCluster,
  dropDatabase,
  ensureCluster,
  pgUrl,
  shareClusters,
} from "@shardkit/test-db";
import pg from "pg";
import { PrismaClient } from "./generated/prisma/client.js";
import { lineReader } from "./lines.js";

/**
 * One router's registry over the fleet: a client of its own per database (a pool of `pool`
 * connections, named after its database), `perDatabase` logical shards on each (database d holds
 * shards d x perDatabase on). Each client shares its pool with the map's statements, as `openShards`'
 * clients do (`overSharedPool`): the map's open starts no engine.
 */
export function fleetRegistry(urls: readonly string[], perDatabase: number, pool: number) {
  const clients = urls.map(
    (url) =>
      overSharedPool(
        new PrismaPg({ connectionString: url, max: pool }),
        (adapter) => new PrismaClient({ adapter }),
        { name: new URL(url).pathname.slice(1) },
      ).client,
  );
  return createShardRegistry({
    shards: urls.flatMap((_, d) =>
      Array.from({ length: perDatabase }, (_, k) => {
        const i = d * perDatabase + k;
        return { shard: ShardIdentifier.of(i >> 6, i & 63), client: clients[d]! };
      }),
    ),
    databases: clients.map((client, d) => ({ client, name: new URL(urls[d]!).pathname.slice(1) })),
  });
}

/** The fleet's own server: room for 16 routers x 64 databases x a pool of 1, and the test's own. */
export const FLEET_SERVER = { cluster: "skmaps", port: 5446, maxConnections: 1200 };

/** What one router's open did (printed by `fleet-opener.ts`). */
export interface RouterOpen {
  ok: boolean;
  error?: string;
  /** How long its open took (ms), and the CPU its process used meanwhile (ms). */
  ms: number;
  cpuMs?: number;
  /** Databases that had not answered when it opened, and shards whose calls it refuses. */
  unanswered: number;
  problems: number;
  /** The set-ups its open made: `database:functions`, `database:records`. */
  installs: string[];
}

export interface MapFleet {
  names: string[];
  urls: string[];
  /** Drops the databases (the server stays until its last user releases it: `shareFleetServer`). */
  drop(): Promise<void>;
}

/** Starts the fleet's server (made if absent), with `pg_stat_statements` to count what routers send. */
async function fleetServer(): Promise<number> {
  await ensureCluster(FLEET_SERVER.cluster, FLEET_SERVER.port, {
    maxConnections: FLEET_SERVER.maxConnections,
    preload: ["pg_stat_statements"],
  });
  await admin((c) => c.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"));
  return FLEET_SERVER.port;
}

/** `fn` with a connection to the fleet's server (its `postgres` database), closed after. */
async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: pgUrl(FLEET_SERVER.port, "postgres") });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Statements run so far in the databases `names` (`pg_stat_statements`: every statement, of every session). */
export function statementsIn(names: readonly string[]): Promise<number> {
  return admin(async (c) => {
    const { rows } = await c.query<{ n: string }>(
      `SELECT coalesce(sum(s.calls), 0)::text AS n FROM pg_stat_statements s
         JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = ANY($1)`,
      [names],
    );
    return Number(rows[0]!.n);
  });
}

/**
 * The fleet's server (`fleetServer`) shared with any other run of these tests on the machine
 * (`shareClusters`): made for the first, stopped and dropped by the last. Resolves to this run's release.
 */
export function shareFleetServer(): Promise<() => Promise<void>> {
  return shareClusters(`cluster-${FLEET_SERVER.cluster}`, {
    clusters: [FLEET_SERVER.cluster],
    make: async () => {
      await fleetServer();
    },
    drop: () => dropCluster(FLEET_SERVER.cluster),
  });
}

/** `n` databases `sk_fleet_<tag>_<pid>_<i>` on the fleet's server, each with the test schema. */
export async function mapFleet(n: number, tag: string): Promise<MapFleet> {
  const { port } = FLEET_SERVER;
  const base = `sk_fleet_${tag}_${process.pid}`;
  const template = `${base}_tpl`;
  const templateUrl = await createDatabase(port, template);
  await rolloutSchema({
    schema: new URL("./schema.prisma", import.meta.url).pathname,
    targets: [{ name: template, adapter: new PrismaPg({ connectionString: templateUrl, max: 1 }) }],
    onProgress: () => {},
  });
  const names = Array.from({ length: n }, (_, i) => `${base}_${i}`);
  // CREATE DATABASE from one template takes its turn on the server: one at a time.
  for (const name of names) await createDatabase(port, name, { template });
  await dropDatabase(port, template);
  return {
    names,
    urls: names.map((name) => pgUrl(port, name)),
    async drop() {
      for (const name of names) await dropDatabase(port, name);
    },
  };
}

/**
 * `count` router processes over `urls`, each made and waiting; the returned `go` opens all of their
 * maps at the same moment and resolves with what each open did. `env` sets `FLEET_*` options (see
 * `fleet-opener.ts`). Each process is ended when its open is reported, or killed by `kill`.
 */
export async function fleetRouters(urls: readonly string[], count: number, env: Record<string, string> = {}) {
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ["--import", "tsx", "test/fleet-opener.ts"], {
      cwd: new URL("..", import.meta.url).pathname,
      env: { ...process.env, FLEET_URLS: JSON.stringify(urls), ...env },
      stdio: ["pipe", "pipe", "inherit"],
      detached: true,
    }),
  );
  const kill = () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null && child.pid) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {}
      }
    }
  };
  try {
    const lines = children.map((child, i) => lineReader(child, `router ${i + 1}`, 180_000));
    for (const next of lines) if ((await next()) !== "ready") throw new Error("a router did not start");
    return {
      kill,
      lines,
      children,
      async go(): Promise<RouterOpen[]> {
        for (const child of children) child.stdin!.write("go\n");
        return Promise.all(lines.map(async (next) => JSON.parse(await next()) as RouterOpen));
      },
    };
  } catch (error) {
    kill();
    throw error;
  }
}
