import { cpSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { freshPGlite } from "../test/pglite-templates.js";
import { models } from "../test/world.js";
import { parseGid } from "./atomic-sql.js";
import {
  AtomicUnavailableError,
  CrossShardError,
  ShardKeyRequiredError,
  UnknownShardError,
} from "./errors.js";
import { createShardRegistry, shardRouting } from "./index.js";
import { rolloutSchema } from "./rollout.js";

const schema = new URL("../test/schema.prisma", import.meta.url).pathname;
const s = (g: number, m: number) => ShardIdentifier.of(g, m);

/** PGlite databases for `layout` (in memory, or in `dirs`), `prepared` transactions allowed if given. */
async function pgliteWorld(
  layout: ShardIdentifier[][],
  options: { prepared?: number; dirs?: string[] } = {},
) {
  const settings =
    options.prepared === undefined
      ? {}
      : { postgresqlconf: [`max_prepared_transactions = ${options.prepared}`] };
  // Database i a copy of template i (databases told apart as on servers), or opened in a folder.
  const dbs = await Promise.all(
    layout.map((_, i) => (options.dirs ? new PGlite(options.dirs[i], settings) : freshPGlite(i, settings))),
  );
  await rolloutSchema({
    schema,
    targets: dbs.map((db, i) => ({ name: `pglite-${i}`, adapter: new PrismaPGlite(db) })),
    onProgress: () => {},
  });
  const clients = dbs.map((db) => new PrismaClient({ adapter: new PrismaPGlite(db) }));
  const registry = createShardRegistry({
    shards: layout.flatMap((shards, i) => shards.map((shard) => ({ shard, client: clients[i]! }))),
  });
  const db = clients[0]!.$extends(shardRouting({ registry, models }));
  return {
    db,
    clients,
    close: async () => {
      await registry.disconnect();
      for (const pglite of dbs) await pglite.close();
    },
  };
}

describe("embedded PGlite shards: four shards in two groups on two databases", () => {
  let world: Awaited<ReturnType<typeof pgliteWorld>>;
  beforeAll(async () => {
    world = await pgliteWorld([
      [s(0, 0), s(0, 1)],
      [s(1, 0), s(1, 1)],
    ]);
  });
  afterAll(() => world.close());

  it("routes by key, refuses keyless work and runs one action per shard", async () => {
    const { db, clients } = world;
    const eu = ShardedId.generate("Customer", s(0, 1));
    const mx = ShardedId.generate("Customer", s(1, 0));
    await db.customer.create({ data: { id: eu, name: "eu", region: "eu" } });
    await db.customer.create({ data: { id: mx, name: "mx", region: "mx" } });
    expect(await clients[0]!.customer.count()).toBe(1);
    expect(await clients[1]!.customer.count()).toBe(1);
    expect(
      (await db.customer.findMany({ where: { id: { in: [eu, mx] } }, orderBy: { name: "asc" } })).map(
        (c) => c.name,
      ),
    ).toEqual(["eu", "mx"]);
    await expect(db.customer.findMany()).rejects.toBeInstanceOf(ShardKeyRequiredError);
    await expect(
      db.$action((unit) => {
        unit.update("customer", { where: { id: eu }, data: { name: "x" } });
        unit.update("customer", { where: { id: mx }, data: { name: "y" } });
      }),
    ).rejects.toBeInstanceOf(CrossShardError);
    await db.$action(
      (unit) => {
        unit.update("customer", { where: { id: eu }, data: { name: "eu2" } });
        unit.update("customer", { where: { id: mx }, data: { name: "mx2" } });
      },
      { allowCrossShard: true },
    );
    expect((await db.customer.findUnique({ where: { id: mx } }))?.name).toBe("mx2");
  });
});

describe("single-database mode: every shard in one database behaves like the plain client", () => {
  let world: Awaited<ReturnType<typeof pgliteWorld>>;
  beforeAll(async () => {
    world = await pgliteWorld([[ShardIdentifier.DEFAULT, s(0, 1), s(0, 2), s(0, 3)]]);
  });
  afterAll(() => world.close());

  it("keyless queries, raw SQL, $transaction and the fluent API run on the one database", async () => {
    const { db } = world;
    const id = ShardedId.generate("Customer", ShardIdentifier.DEFAULT);
    await db.customer.create({ data: { id, name: "solo", region: "eu" } });
    expect(await db.customer.findMany()).toHaveLength(1);
    expect(await db.customer.count({ where: { name: "solo" } })).toBe(1);
    await db.setting.create({ data: { name: "k", value: "v" } });
    const rows = await db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM "Customer"`;
    expect(rows[0]?.n).toBe(1);
    await expect(
      db.$transaction(async (tx) => {
        await tx.customer.update({ where: { id }, data: { name: "rolled back" } });
        throw new Error("abort");
      }),
    ).rejects.toThrow("abort");
    expect((await db.customer.findUnique({ where: { id } }))?.name).toBe("solo");
    await db.wallet.create({
      data: { id: ShardedId.colocatedWith("Wallet", id), customerId: id, balance: 2n },
    });
    expect(await db.customer.findUnique({ where: { id } }).wallets()).toHaveLength(1);
  });

  it("still refuses an ID of a shard it does not hold", async () => {
    await expect(
      world.db.customer.findUnique({ where: { id: ShardedId.generate("Customer", s(4, 4)) } }),
    ).rejects.toBeInstanceOf(UnknownShardError);
  });
});

describe("atomic actions across embedded PGlite databases", () => {
  const PREPARED = "SELECT gid FROM pg_prepared_xacts";
  const layout = [[s(0, 0)], [s(1, 0)]];
  const transfer = (unit: Parameters<Parameters<typeof world.db.$action>[0]>[0], ids: string[]) => {
    unit.update("wallet", { where: { id: ids[0]! }, data: { balance: { decrement: 5n } } });
    unit.update("wallet", { where: { id: ids[1]! }, data: { balance: { increment: 5n } } });
  };
  let world: Awaited<ReturnType<typeof pgliteWorld>>;
  let wallets: string[];
  beforeAll(async () => {
    world = await pgliteWorld(layout, { prepared: 4 });
    wallets = [];
    for (const shard of [s(0, 0), s(1, 0)]) {
      const customerId = ShardedId.generate("Customer", shard);
      await world.db.customer.create({ data: { id: customerId, name: shard.key, region: "eu" } });
      const id = ShardedId.colocatedWith("Wallet", customerId);
      await world.db.wallet.create({ data: { id, customerId, balance: 10n } });
      wallets.push(id);
    }
  });
  afterAll(() => world.close());

  it("started with max_prepared_transactions: commits on both, each database named apart, nothing left prepared", async () => {
    // Once both prepared: their global ids name two databases, the first deciding (two PGlite
    // databases have no server port of their own to tell them apart by, only their system id).
    let prepared = 0;
    const gids: string[] = [];
    await world.db.$action((unit) => transfer(unit, wallets), {
      atomic: true,
      atomicProbe: async (point) => {
        if (point !== "prepared" || ++prepared < 2) return;
        for (const client of world.clients)
          gids.push(...(await client.$queryRawUnsafe<{ gid: string }[]>(PREPARED)).map((r) => r.gid));
      },
    });
    const [x, y] = gids.map((gid) => parseGid(gid)!);
    expect(x!.self).not.toBe(y!.self);
    expect([x!.decider, y!.decider]).toEqual([x!.self, x!.self]);
    const balances = await Promise.all(
      wallets.map(async (id) => (await world.db.wallet.findUnique({ where: { id } }))!.balance),
    );
    expect(balances).toEqual([5n, 15n]);
    for (const client of world.clients) expect(await client.$queryRawUnsafe(PREPARED)).toEqual([]);
    // The decision was recorded on the first database only: the two were told apart.
    const decisions = await Promise.all(world.clients.map((c) => c.atomicDecision.count()));
    expect(decisions).toEqual([1, 0]);
  });

  it("two copies of one data directory (one identity): refused before anything is written, naming both", async () => {
    const dirs = ["a", "b"].map((d) => join(tmpdir(), `sk-pglite-twin-${process.pid}-${d}`));
    try {
      await (await freshPGlite(0, { dataDir: dirs[0]! })).close();
      cpSync(dirs[0]!, dirs[1]!, { recursive: true });
      const twins = await pgliteWorld(layout, { prepared: 4, dirs });
      try {
        const error = await twins.db
          .$action((unit) => transfer(unit, wallets), { atomic: true })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(AtomicUnavailableError);
        expect(String(error)).toMatch(/it reports the same server and database as /);
      } finally {
        await twins.close();
      }
    } finally {
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    }
  });

  it("started without it: refused before anything is written, saying how to start PGlite", async () => {
    const plain = await pgliteWorld(layout);
    try {
      const error = await plain.db
        .$action((unit) => transfer(unit, wallets), { atomic: true })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AtomicUnavailableError);
      expect(String(error)).toMatch(/embedded PGlite with max_prepared_transactions = 0.*postgresqlconf/);
    } finally {
      await plain.close();
    }
  });
});
