import { existsSync } from "node:fs";
import { PrismaPg } from "@prisma/adapter-pg";
import { createShardRegistry, describeSkew, skewedRouters } from "@shardkit/prisma";
import { CREATE_LOAD_TABLE } from "@shardkit/prisma/internal";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, MAIN_PORT, patient, runProgram, withClient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaClient } from "../../test/generated/prisma/client.js";
import { TABLES } from "../../test/layout.js";
import { sumLoad } from "./measure.js";
import { runBalance } from "./run.js";

// Router processes whose wall clocks are really off (libfaketime: the process's own clock calls,
// nothing in shardkit told): one an hour ahead, one ten minutes behind, one right. Each writes
// through the shardkit extension with load recording on to two databases, 70% of the calls to a and
// 30% to b, and flushes its load windows; the databases stamp the windows by their own clock. The
// balance plan's measurement then gives each database the share of the load PostgreSQL counted
// itself (`pg_stat_database`'s commits: each routed create is one), and the skewed routers are named.

/** Debian's libfaketime (the `faketime` package; `.ci/run` installs it), or undefined. */
const LIBFAKETIME = ["x86_64", "aarch64"]
  .map((arch) => `/usr/lib/${arch}-linux-gnu/faketime/libfaketime.so.1`)
  .find((path) => existsSync(path));

const names = { a: `sk_clock_a_${process.pid}`, b: `sk_clock_b_${process.pid}` };
/** 0/0 and 0/1 on a, 1/0 on b. */
const placed = { a: ["0/0", "0/1"], b: ["1/0"] };
let urls = { a: "", b: "" };

/** The routers: their clocks (libfaketime's FAKETIME, none for the right one) and their creates per shard. */
const ROUTERS = [
  {
    name: "ahead",
    faketime: "+1h",
    writes: [
      ["0/0", 300],
      ["1/0", 100],
    ],
  },
  {
    name: "behind",
    faketime: "-10m",
    writes: [
      ["0/1", 250],
      ["1/0", 120],
    ],
  },
  {
    name: "right",
    faketime: undefined,
    writes: [
      ["0/0", 150],
      ["1/0", 80],
    ],
  },
] as const;
const CALLS = { a: 700, b: 300 };

beforeAll(async () => {
  if (!LIBFAKETIME) return;
  urls = { a: await createDatabase(MAIN_PORT, names.a), b: await createDatabase(MAIN_PORT, names.b) };
  await rolloutSchema({
    schema: new URL("../../test/schema.prisma", import.meta.url).pathname,
    targets: (["a", "b"] as const).map((k) => ({
      name: names[k],
      adapter: new PrismaPg({ connectionString: urls[k] }),
    })),
    onProgress: () => {},
  });
  // The load tables made as a fleet's set-up makes them (else the three routers' first flushes
  // would each make them, at the same moment).
  for (const url of Object.values(urls))
    await withClient(url, async (c) => {
      for (const ddl of CREATE_LOAD_TABLE) await c.query(ddl);
    });
}, patient(120_000));

afterAll(async () => {
  if (!LIBFAKETIME) return;
  for (const name of Object.values(names)) await dropDatabase(MAIN_PORT, name);
}, patient(60_000));

/** Each database's commits so far and the connections to it, read from another database (`postgres`). */
async function commits(): Promise<{ a: number; b: number; connected: number }> {
  return withClient(urls.a.replace(names.a, "postgres"), async (c) => {
    await c.query("SELECT pg_stat_clear_snapshot()");
    const { rows }: { rows: { datname: string; n: string; connected: number }[] } = await c.query(
      `SELECT datname, xact_commit::text AS n,
              (SELECT count(*)::int FROM pg_stat_activity a WHERE a.datname = d.datname) AS connected
         FROM pg_stat_database d WHERE datname = ANY($1)`,
      [[names.a, names.b]],
    );
    const of = (name: string) => rows.find((r) => r.datname === name);
    return {
      a: Number(of(names.a)?.n ?? 0),
      b: Number(of(names.b)?.n ?? 0),
      connected: rows.reduce((n, r) => n + r.connected, 0),
    };
  });
}

/** One router process (test/clock-router.ts), its clock `faketime` off the machine's: what it printed. */
async function routerProcess(r: (typeof ROUTERS)[number], signal: AbortSignal) {
  const databases = (["a", "b"] as const).map((k) => ({ name: names[k], url: urls[k], shards: placed[k] }));
  const output = await runProgram("test/clock-router.ts", {
    cwd: new URL("../..", import.meta.url).pathname,
    env: {
      CLOCK_ROUTER: JSON.stringify({ databases, writes: r.writes }),
      LD_PRELOAD: r.faketime === undefined ? undefined : LIBFAKETIME,
      FAKETIME: r.faketime,
    },
    signal,
  });
  return JSON.parse(output.trim().split("\n").at(-1)!) as {
    router: string;
    clock: number;
    flushed: [string, string][];
  };
}

/** A registry of the balancer's own over the two databases (the configuration the routers have). */
function balancerRegistry() {
  const clients = (["a", "b"] as const).map(
    (k) => new PrismaClient({ adapter: new PrismaPg({ connectionString: urls[k] }) }),
  );
  return createShardRegistry({
    shards: [
      ...placed.a.map((shard) => ({ shard, client: clients[0]! })),
      ...placed.b.map((shard) => ({ shard, client: clients[1]! })),
    ],
    databases: [
      { client: clients[0]!, name: names.a },
      { client: clients[1]!, name: names.b },
    ],
  });
}

/**
 * The commits on each database since `before`, once every router's connections have ended (their
 * last statistics with them): the routed creates, and each router's own on each database (its
 * flush, its rollup, and its connection's start, which PostgreSQL counts as a commit: 3).
 */
async function committedSince(before: { a: number; b: number }) {
  let delta = { a: 0, b: 0 };
  await eventually("the routers' connections to end, and PostgreSQL to count their commits", async () => {
    const after = await commits();
    delta = { a: after.a - before.a, b: after.b - before.b };
    return after.connected === 0 && delta.a >= CALLS.a && delta.b >= CALLS.b;
  });
  return delta;
}

/** Each database's share of the load as a balance plan measures it (`runBalance`, a dry run), and its shards' calls. */
async function planShares(registry: ReturnType<typeof balancerRegistry>, windowMs: number) {
  const run = await runBalance({
    registry,
    tables: TABLES,
    mode: "offline",
    dryRun: true,
    by: "calls",
    windowMs,
    timeoutMs: patient(10_000),
  });
  expect(run.problems).toEqual([]);
  const onA = run.shards.filter((s) => s.database === names.a).reduce((n, s) => n + s.load, 0);
  const total = run.shards.reduce((n, s) => n + s.load, 0);
  return {
    calls: Object.fromEntries(run.shards.map((s) => [s.shard, s.calls])),
    share: { a: onA / total, b: 1 - onA / total },
  };
}

describe.skipIf(!LIBFAKETIME)(
  "router processes with faked clocks (skipped without libfaketime: Debian's faketime package)",
  () => {
    it(
      "an hour ahead, ten minutes behind and one right: the plan's load per database is PostgreSQL's share of commits within 5%, and the two skewed routers are named",
      async ({ signal }) => {
        const started = Date.now();
        const before = await commits();
        const routers = await Promise.all(ROUTERS.map((r) => routerProcess(r, signal)));
        for (const r of routers)
          expect(r.flushed.map(([, status]) => status)).toEqual(["written", "written"]);
        // Their clocks were off by what they were told (a process's own reading: libfaketime works).
        expect(routers[0]!.clock - Date.now()).toBeGreaterThan(3_000_000);
        expect(routers[1]!.clock - Date.now()).toBeLessThan(-500_000);
        const delta = await committedSince(before);

        const registry = balancerRegistry();
        try {
          // The load windows of the last 5 minutes by each database's clock (the balancer's
          // default), or of the whole test if it took longer.
          const plan = await planShares(registry, Math.max(300_000, Date.now() - started + 60_000));
          expect(plan.calls).toEqual({ "0/0": 450, "0/1": 250, "1/0": 300 });
          const pg = { a: delta.a / (delta.a + delta.b), b: delta.b / (delta.a + delta.b) };
          const figures = `plan a ${plan.share.a.toFixed(4)} b ${plan.share.b.toFixed(4)}; pg_stat_database a ${pg.a.toFixed(4)} b ${pg.b.toFixed(4)} (commits ${delta.a}, ${delta.b}; calls ${CALLS.a}, ${CALLS.b})`;
          if (process.env.SHARDKIT_CLOCK_FIGURES) console.info(figures);
          // Within 5% of each database's share as PostgreSQL counted it.
          expect(Math.abs(plan.share.a - pg.a) / pg.a, figures).toBeLessThan(0.05);
          expect(Math.abs(plan.share.b - pg.b) / pg.b, figures).toBeLessThan(0.05);

          // The function behind `shardkit doctor`'s clock finding, over its 10 minutes: the two
          // skewed routers, the one furthest off first; the right one is not named.
          const { sums } = await sumLoad(registry.databases, 600_000, patient(10_000));
          const skewed = skewedRouters(sums);
          expect(skewed.map((r) => r.router)).toEqual([routers[0]!.router, routers[1]!.router]);
          const [ahead, behind] = skewed;
          expect(ahead!.skewMs).toBeGreaterThan(3_540_000);
          expect(ahead!.skewMs).toBeLessThan(3_660_000);
          expect(behind!.skewMs).toBeGreaterThan(-660_000);
          expect(behind!.skewMs).toBeLessThan(-540_000);
          expect(describeSkew(ahead!)).toBe(
            `router ${ahead!.router}'s clock is 1 h 0 min ahead of its database's`,
          );
          expect(describeSkew(behind!)).toMatch(/'s clock is (9 min 5\d|10 min \d) s behind its database's$/);
        } finally {
          await registry.disconnect();
        }
      },
      patient(180_000),
    );
  },
);
