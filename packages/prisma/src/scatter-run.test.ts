import { ShardedId } from "@shardkit/id";
import { patient, withClusterFrozen } from "@shardkit/test-db";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { makeWorld, S } from "../test/world.js";
import type { ScatterReport } from "./scatter/options.js";

/** The second server, which these tests stop or freeze: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

// A scatter's options on real databases: the whole scatter's deadline, the concurrency limit and
// the partial policy, with the legs' own deadline (`timeoutMs`) beside them. Database c (the second
// server) holds 1/1 and 1/2.
const world = makeWorld();
const { db } = world;
afterAll(() => world.close());
beforeEach(() => world.truncate());

const shards = Object.values(S);
async function seed() {
  for (const [i, shard] of shards.entries()) {
    await db.customer.create({
      data: { id: ShardedId.generate("Customer", shard), name: `c${i}`, region: "x" },
    });
  }
}

/** The routed client with a query extension on every database counting the legs in flight at once. */
function counted() {
  const seen = { now: 0, most: 0 };
  const client = db.$extends({
    query: {
      $allModels: {
        async $allOperations({ args, query }) {
          seen.now++;
          seen.most = Math.max(seen.most, seen.now);
          try {
            return await query(args);
          } finally {
            seen.now--;
          }
        },
      },
    },
  });
  return { client, seen };
}

describe("scatter options", () => {
  it("concurrency bounds the legs in flight; without it every database is asked at once", async () => {
    await seed();
    const { client, seen } = counted();
    expect(await client.$scatter({ concurrency: 1 }).customer.count()).toBe(6);
    expect(seen.most).toBe(1);
    seen.most = 0;
    const rows = await client.$scatter({}).customer.findMany({ orderBy: { name: "asc" }, take: 4 });
    expect(rows.map((r) => r.name)).toEqual(["c0", "c1", "c2", "c3"]);
    expect(seen.most).toBe(3);
  });

  it(
    "past deadlineMs, a frozen database is missing ('deadline'); 'partial' answers from the others",
    async () => {
      await seed();
      const reports: ScatterReport[] = [];
      // A deadline a busy host's healthy databases meet: only the frozen one may miss it.
      const partial = db.$scatter({ policy: "partial", deadlineMs: 5000, onReport: (r) => reports.push(r) });
      await withClusterFrozen(SECOND.cluster, async () => {
        const rows = await partial.customer.findMany({ orderBy: { name: "asc" } });
        expect(rows.map((r) => r.name)).toEqual(["c0", "c1", "c2", "c3"]);
        const failed = await db
          .$scatter({ deadlineMs: 5000 })
          .customer.count()
          .catch((e: unknown) => e);
        expect(failed).toMatchObject({ code: "DEADLINE_EXCEEDED" });
      });
      const [report] = reports;
      expect(report?.complete).toBe(false);
      expect(report?.targets.map((t) => [t.status, t.reason])).toEqual([
        ["fulfilled", undefined],
        ["fulfilled", undefined],
        ["missing", "deadline"],
      ]);
      expect(report?.missingShards.map((s) => s.key)).toEqual(["1/1", "1/2"]);
    },
    patient(60_000),
  );
});
