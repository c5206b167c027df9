import type { ShardIdentifier } from "@shardkit/id";
import { LoadRecorder, loadOptionsOf } from "@shardkit/prisma/internal";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { beforeEach, describe, expect, inject, it } from "vitest";
import { resetWithLoad, routers, S, TABLES } from "../../test/world.js";
import { runBalance } from "./run.js";

// A full balance plan over routers whose clocks are off: one an hour ahead, one ten minutes behind.
// Their windows are stamped by the databases' clocks, so the plan sees the load where PostgreSQL
// counted it (each call is a commit there) and moves it off the loaded database. 0/0 and 0/1 on a,
// 1/0 on b, e a spare; each shard takes 300 calls (none hotter than the mean database), so a
// takes 600 and b 300.
const urls = inject("ownershipUrls");
const make = routers(urls);
beforeEach(() => resetWithLoad(urls, make));

/** Each database's commits so far, by its own count (reading them is one more). */
async function commits(): Promise<number[]> {
  return Promise.all(
    (["a", "b", "e"] as const).map(async (name) => {
      const client = new pg.Client({ connectionString: urls[name] });
      await client.connect();
      try {
        await client.query("SELECT pg_stat_clear_snapshot()");
        const { rows } = await client.query<{ n: string }>(
          "SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()",
        );
        return Number(rows[0]!.n);
      } finally {
        await client.end();
      }
    }),
  );
}

describe("a balance plan over routers with skewed clocks", () => {
  it(
    "a router an hour ahead and one ten minutes behind: the plan measures the load PostgreSQL counted and moves it off a",
    async () => {
      const r = make();
      /** A router whose clock is `offsetMs` off the machine's, recording the load of its calls. */
      const recorder = (offsetMs: number) =>
        new LoadRecorder(
          { layout: r.registry, databases: r.registry.databases, keysOf: () => ["id"] },
          loadOptionsOf({ intervalMs: 600_000 }, "load", [])!,
          () => Date.now() + offsetMs,
        );
      const ahead = recorder(3_600_000);
      const behind = recorder(-600_000);
      /** `n` real statements (a transaction each) on `shard`'s database, counted by `load`. */
      const calls = async (load: LoadRecorder, shard: ShardIdentifier, n: number) => {
        const client = r.registry.databaseOf(shard).client;
        for (let i = 0; i < n; i++) await load.timed(client.$queryRawUnsafe("SELECT 1"), [shard], "queryRaw");
      };
      const before = await commits();
      await calls(ahead, S.g0m0, 300);
      await calls(behind, S.g0m1, 300);
      await calls(ahead, S.g1m0, 150);
      await calls(behind, S.g1m0, 150);
      for (const load of [ahead, behind]) {
        const flushed = await load.flush();
        expect(flushed.map((f) => f.status)).toEqual(flushed.map(() => "written"));
      }
      let counted = [0, 0, 0];
      await eventually("PostgreSQL to count the statements' commits", async () => {
        counted = (await commits()).map((n, i) => n - before[i]!);
        return counted[0]! >= 600 && counted[1]! >= 300;
      });

      const run = await runBalance({
        registry: r.registry,
        tables: TABLES,
        mode: "offline",
        dryRun: true,
        by: "calls",
        windowMs: 300_000,
      });
      expect(run.problems).toEqual([]);
      const measured = new Map(run.shards.map((s) => [s.shard, s]));
      expect([S.g0m0, S.g0m1, S.g1m0].map((s) => measured.get(s.key)?.calls)).toEqual([300, 300, 300]);
      // The share of the load on a, as measured and as PostgreSQL counted its commits.
      const onA = run.shards.filter((s) => s.database === "a").reduce((sum, s) => sum + s.calls, 0);
      const share = onA / run.shards.reduce((sum, s) => sum + s.calls, 0);
      const pgShare = counted[0]! / (counted[0]! + counted[1]! + counted[2]!);
      expect(Math.abs(share - pgShare), `commits ${counted.join(", ")}`).toBeLessThan(0.05);
      // The plan moves one of a's shards to the spare, e, and nothing onto a.
      expect(run.plan!.moves, run.plan!.reason).toHaveLength(1);
      expect(run.plan!.moves[0]).toMatchObject({ from: "a", to: "e" });
      expect(["0/0", "0/1"]).toContain(run.plan!.moves[0]!.shard);
    },
    patient(60_000),
  );
});
