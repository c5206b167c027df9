import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, patient, shareCluster } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { reset, router, S, transfer } from "../test/world.js";
import { MoveTimeoutError, StaleOwnerError } from "./errors.js";
import { moveShard } from "./move.js";
import type { Raw } from "./raw.js";

// Atomic actions (two-phase commit, @shardkit/prisma) against the partition map: a stale router's
// prepare at a former owner is refused like any write, and a move never switches a shard while an
// atomic action is prepared on it at its source. On a server of their own with
// max_prepared_transactions > 0 (shared with @shardkit/prisma's atomic tests when runs overlap).

const SERVER = { cluster: "skatomic", port: 5461 };
let urls: { a: string; b: string; e: string };
let release: () => Promise<void>;

beforeAll(async () => {
  // The same server as @shardkit/prisma's atomic tests, with the same settings.
  const drop = await shareCluster(SERVER.cluster, SERVER.port, {
    settings: { max_prepared_transactions: 50 },
  });
  const names = { a: "", b: "", e: "" };
  urls = { a: "", b: "", e: "" };
  for (const key of ["a", "b", "e"] as const) {
    names[key] = `sk_atomic_own_${key}_${process.pid}`;
    urls[key] = await createDatabase(SERVER.port, names[key]);
  }
  await rolloutSchema({
    schema: new URL("../test/schema.prisma", import.meta.url).pathname,
    targets: (["a", "b", "e"] as const).map((key) => ({
      name: names[key],
      adapter: new PrismaPg({ connectionString: urls[key] }),
    })),
    onProgress: () => {},
  });
  release = async () => {
    for (const key of ["a", "b", "e"] as const) await dropDatabase(SERVER.port, names[key]).catch(() => {});
    await drop();
  };
}, patient(180_000));
afterAll(() => release?.(), patient(120_000));
beforeEach(() => reset(urls));

const prepared = async (r: ReturnType<typeof router>) =>
  (
    await Promise.all(
      Object.values(r.clients).map((c) =>
        c.$queryRawUnsafe<{ gid: string }[]>(
          "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()",
        ),
      ),
    )
  ).flat();

describe("atomic actions and the partition map", () => {
  it("a stale router's atomic action is refused by the former owner before it prepares, and runs at the owner", async () => {
    const mover = router(urls);
    const spent = router(urls); // a stale router with no retry allowed
    const stale = router(urls); // a stale router with retries
    try {
      const map = await mover.open();
      const spentMap = await spent.open({ retries: 0 });
      const staleMap = await stale.open();
      await transfer(map, S.g0m1, mover.databases.e);
      expect(spent.registry.databaseOf(S.g0m1).name).toBe("a");
      expect(stale.registry.databaseOf(S.g0m1).name).toBe("a");
      const pair = () => ({
        moved: { id: ShardedId.generate("Bucket", S.g0m1), name: "moved", remaining: 1 },
        stays: { id: ShardedId.generate("Bucket", S.g1m0), name: "stays", remaining: 1 },
      });
      const refused = pair();
      const error = await spent.db
        .$action(
          (unit) => {
            unit.create("bucket", { data: refused.moved });
            unit.create("bucket", { data: refused.stays });
          },
          { atomic: true },
        )
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StaleOwnerError);
      // Nothing anywhere: not at the former owner, not at the other participant, nothing prepared.
      for (const c of Object.values(spent.clients)) expect(await c.bucket.count()).toBe(0);
      expect(await prepared(spent)).toEqual([]);
      // With retries, the refusal refreshes the map and the action runs at the owner, atomically.
      const ok = pair();
      await stale.db.$action(
        (unit) => {
          unit.create("bucket", { data: ok.moved });
          unit.create("bucket", { data: ok.stays });
        },
        { atomic: true },
      );
      expect(staleMap.counters).toMatchObject({ staleRejections: 1, retries: 1 });
      expect(await stale.clients.e.bucket.count()).toBe(1);
      expect(await stale.clients.b.bucket.count()).toBe(1);
      expect(await stale.clients.a.bucket.count()).toBe(0);
      expect(await prepared(stale)).toEqual([]);
      for (const m of [map, spentMap, staleMap]) m.close();
    } finally {
      for (const r of [mover, spent, stale]) await r.close();
    }
  });

  it(
    "a move does not switch a shard with an atomic action prepared on it at its source: undone within its freeze budget, then done once it is concluded",
    async () => {
      const r = router(urls);
      try {
        const map = await r.open({ retries: 400 });
        let both!: () => void;
        const stopped = new Promise<void>((resolve) => (both = resolve));
        let count = 0;
        // It names 0/1 (a check on it, in a's transaction) without writing a table the move's
        // fence covers: a transaction that writes them holds locks the move's arming waits for
        // anyway. What is tested is the move's own check of the prepared transactions it names.
        const other = ShardedId.generate("Bucket", S.g1m0);
        void r.db
          .$action(
            (unit) => {
              unit.on(S.g0m1, (tx) => (tx as unknown as Raw).$queryRawUnsafe("SELECT 1"));
              unit.create("bucket", { data: { id: other, name: "b", remaining: 1 } });
            },
            {
              atomic: true,
              atomicProbe: (point) => {
                if (point !== "prepared") return undefined;
                if (++count === 2) both();
                return new Promise<void>(() => {});
              },
            },
          )
          .catch(() => {});
        await stopped;
        const error = await moveShard({
          map,
          shard: S.g0m1,
          to: r.databases.e,
          mode: "offline",
          freezeBudgetMs: 300,
          onProgress: () => {},
        }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(MoveTimeoutError);
        expect(String(error)).toMatch(/atomic actions prepared on the shard/);
        expect(r.registry.databaseOf(S.g0m1).name).toBe("a"); // undone: a still owns it
        // Recovery concludes the action (no decision: rolled back); the move then goes through.
        await eventually("recovery", async () => {
          await r.db.$recoverAtomic({ leaseMs: 0 });
          return (await prepared(r)).length === 0;
        });
        await moveShard({ map, shard: S.g0m1, to: r.databases.e, mode: "offline", onProgress: () => {} });
        expect(r.registry.databaseOf(S.g0m1).name).toBe("e");
        expect(await r.db.bucket.findUnique({ where: { id: other } })).toBeNull(); // rolled back with it
        map.close();
      } finally {
        await r.close();
      }
    },
    patient(120_000),
  );
});
