import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { createShardRegistry } from "@shardkit/prisma";
import { createDatabase, dropDatabase, MAIN_PORT, patient, withClusterStopped } from "@shardkit/test-db";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { reset, type router, routers, S, transfer } from "../test/world.js";
import { OwnershipOptionsError } from "./errors.js";
import { ShardLease } from "./lease.js";
import type { ShardOwner } from "./owners.js";
import { readPartitionMap } from "./view.js";

/** The second server, which these tests stop: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

const make = routers();
const bare = `sk_owner_bare_${process.pid}`;
afterAll(async () => {
  await dropDatabase(MAIN_PORT, bare);
});
beforeEach(() => reset());

/** What the read must never leave behind: ownership records, shardkit functions, fence triggers. */
async function footprint(client: PrismaClient) {
  const [row] = await client.$queryRawUnsafe<{ table: boolean; functions: number; triggers: number }[]>(
    `SELECT to_regclass(quote_ident('ShardOwnership')) IS NOT NULL AS "table",
       (SELECT count(*)::int FROM pg_proc WHERE proname LIKE 'shardkit%') AS functions,
       (SELECT count(*)::int FROM pg_trigger WHERE tgname LIKE 'shardkit%') AS triggers`,
  );
  const rows = row!.table
    ? (await client.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM "ShardOwnership"`))[0]!.n
    : null;
  return { ...row!, rows };
}

/** A placement with its databases by name (a database's client does not compare). */
const named = (p: ShardOwner<PrismaClient>) => ({
  ...p,
  configured: p.configured.name,
  owner: p.owner?.name ?? null,
});

/** Moves 0/1 from a to e by hand, under a lease (fence, copy, switch), as a mover with its own map. */
async function moveByHand(mover: ReturnType<typeof router>) {
  const map = await mover.open();
  await mover.db.bucket.create({
    data: { id: ShardedId.generate("Bucket", S.g0m1), name: "B", remaining: 1 },
  });
  await transfer(map, S.g0m1, mover.databases.e);
  return map;
}

describe("readPartitionMap", () => {
  it("before any map is opened: every shard unrecorded where the registry places it, and it records nothing", async () => {
    const r = make();
    const before = await Promise.all(Object.values(r.clients).map(footprint));
    const view = await readPartitionMap(r.registry);
    expect(view.databases.map((d) => [d.database, d.status, d.records])).toEqual([
      ["a", "recorded", []],
      ["b", "recorded", []],
      ["e", "recorded", []],
    ]);
    expect(view.databases.every((d) => /\/sk_owner_/.test(d.identity ?? ""))).toBe(true);
    expect(view.shards.map((p) => [p.shard.key, p.configured.name, p.owner, p.epoch, p.state])).toEqual([
      ["0/0", "a", null, null, "unrecorded"],
      ["0/1", "a", null, null, "unrecorded"],
      ["1/0", "b", null, null, "unrecorded"],
    ]);
    expect(view.issues).toEqual([]);
    expect(view.apply()).toEqual([]);
    const after = await Promise.all(Object.values(r.clients).map(footprint));
    expect(after).toEqual(before);
    expect(after.map((f) => f.rows)).toEqual([0, 0, 0]);
  });

  it("a database without a ShardOwnership table: said so, and the read creates no table, function or record there", async () => {
    const url = await createDatabase(MAIN_PORT, bare);
    const r = make();
    const empty = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
    try {
      const registry = createShardRegistry({
        shards: [
          { shard: S.g0m0, client: r.clients.a },
          { shard: S.g0m1, client: empty },
        ],
        databases: [
          { client: r.clients.a, name: "a" },
          { client: empty, name: "bare" },
        ],
      });
      const view = await readPartitionMap(registry);
      expect(view.databases.map((d) => [d.database, d.status])).toEqual([
        ["a", "recorded"],
        ["bare", "no-table"],
      ]);
      expect(named(view.ownerOf("0/1"))).toMatchObject({ owner: null, state: "unrecorded", records: [] });
      expect(await footprint(empty)).toEqual({ table: false, functions: 0, triggers: 0, rows: null });
    } finally {
      await empty.$disconnect();
    }
  });

  it("after a move: each shard's owner, epoch and state, every record with its peer by name, and apply() routes a fresh registry there", async () => {
    const map = await moveByHand(make());
    const arming = await ShardLease.take(map, S.g0m0, map.registry.databases.find((p) => p.name === "b")!);
    await arming.arm();
    const r = make(); // a process that never opened a map: its registry still says a
    const view = await readPartitionMap(r.registry);
    expect(named(view.ownerOf(S.g0m1))).toMatchObject({
      configured: "a",
      owner: "e",
      epoch: 2,
      state: "owned",
      movingTo: null,
      records: [
        { database: "a", epoch: 2, state: "moved", peer: "e" },
        { database: "e", epoch: 2, state: "owned", peer: null },
      ],
      issues: [],
    });
    // 0/0 is armed for a move to b: still owned at a, moving to b.
    expect(named(view.ownerOf("0/0"))).toMatchObject({
      owner: "a",
      epoch: 1,
      state: "owned",
      movingTo: "b",
    });
    expect(view.databases.find((d) => d.database === "a")?.records).toContainEqual({
      shard: S.g0m1.bits,
      epoch: 2,
      state: "moved",
      peer: view.databases.find((d) => d.database === "e")!.identity,
      attempt: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(view.nameOf(view.databases[2]!.identity)).toBe("e");
    expect(view.nameOf("elsewhere:5432/x")).toBe("elsewhere:5432/x");
    expect(() => view.ownerOf("9/9")).toThrow(OwnershipOptionsError);

    expect(r.registry.databaseOf(S.g0m1).name).toBe("a");
    // Every shard's epoch is learned; 0/1 also changes database.
    expect(view.apply().map((s) => s.key)).toEqual(["0/0", "0/1", "1/0"]);
    expect(r.registry.databaseOf(S.g0m1).name).toBe("e");
    expect(r.registry.epochOf(S.g0m1)).toBe(2);
    expect(view.apply()).toEqual([]); // applied already
    // The lease of 0/0's move is live: the view shows it, with nothing stopped or left over.
    expect(view.databases.find((d) => d.database === "a")?.moves).toMatchObject([
      { shard: S.g0m0, to: "b", step: "copying", live: true },
    ]);
    expect([view.stopped, view.leftovers]).toEqual([[], []]);
    await arming.unfence();
    await arming.release();
    map.close();
  });

  it(
    "a database that is down makes only its own part unknown: the others are read, nothing throws",
    async () => {
      const map = await moveByHand(make());
      const r = make();
      await withClusterStopped(SECOND.cluster, SECOND.port, async () => {
        const view = await readPartitionMap(r.registry, { timeoutMs: patient(3000) });
        const e = view.databases.find((d) => d.database === "e")!;
        expect({ ...e, physical: e.physical.name }).toMatchObject({
          status: "unavailable",
          records: [],
          identity: null,
        });
        expect(e.status === "unavailable" && e.error).toMatch(/./);
        expect(view.databases.filter((d) => d.status === "recorded").map((d) => d.database)).toEqual([
          "a",
          "b",
        ]);
        // 0/1's owner did not answer; a's tombstone names e, by the identity the view could not ask e for.
        expect(named(view.ownerOf(S.g0m1))).toMatchObject({ owner: null, state: "unknown", epoch: 2 });
        expect(named(view.ownerOf(S.g0m0))).toMatchObject({ owner: "a", epoch: 1, state: "owned" });
        expect(named(view.ownerOf(S.g1m0))).toMatchObject({ owner: "b", epoch: 1, state: "owned" });
      });
      map.close();
    },
    patient(60_000),
  );

  it("records that cannot be right are listed in issues, never thrown", async () => {
    const r = make();
    const map = await r.open();
    await r.clients.b.$executeRawUnsafe(
      `INSERT INTO "ShardOwnership" (shard, epoch, state) VALUES (${S.g0m0.bits}, 1, 'owned'), (${(5 << 6) | 5}, 1, 'owned')`,
    );
    const view = await readPartitionMap(r.registry);
    expect(view.issues).toEqual([
      "b: shard 5/5 is not in the registry",
      "shard 0/0 has two owners: a (epoch 1) and b (epoch 1)",
    ]);
    expect(view.ownerOf(S.g0m0).issues).toEqual(["shard 0/0 has two owners: a (epoch 1) and b (epoch 1)"]);
    expect(view.apply()).toEqual([]); // a shard with issues is not routed anywhere new
    map.close();
  });

  it("an owner record deleted is an issue (a shard no database records while its database records others); one a tombstone names too", async () => {
    const r = make();
    const map = await r.open();
    await r.clients.a.$executeRawUnsafe(`DELETE FROM "ShardOwnership" WHERE shard = ${S.g0m0.bits}`);
    const view = await readPartitionMap(r.registry);
    expect(view.issues).toEqual([
      "shard 0/0: no database records it, though a records other shards: its record was deleted, or the shard is new to the configuration (opening a partition map records it)",
    ]);
    // A moved shard whose new owner's record is deleted: the tombstone names a database that has none.
    await transfer(map, S.g0m1, r.databases.e);
    await r.clients.e.$executeRawUnsafe(`DELETE FROM "ShardOwnership" WHERE shard = ${S.g0m1.bits}`);
    expect((await readPartitionMap(r.registry)).issues).toContain(
      "shard 0/1: a's tombstone says e owns it at epoch 2, but e has no record of it (deleted?)",
    );
    map.close();
  });

  it("refuses options that cannot work", async () => {
    const r = make();
    await expect(readPartitionMap(r.registry, { timeoutMs: 0 })).rejects.toBeInstanceOf(
      OwnershipOptionsError,
    );
    await expect(readPartitionMap(undefined as never)).rejects.toBeInstanceOf(OwnershipOptionsError);
  });
});
