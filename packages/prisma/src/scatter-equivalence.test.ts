import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId } from "@shardkit/id";
import { createDatabase, dropDatabase, MAIN_PORT, patient, pgUrl } from "@shardkit/test-db";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Prisma, PrismaClient } from "../test/generated/prisma/client.js";
import { models, S, worldPlacement } from "../test/layout.js";
import { shardRouting } from "./extension.js";
import { createShardRegistry } from "./registry.js";
import { rolloutSchema } from "./rollout.js";

// Random rows spread over six shards in three databases, against the same rows in one reference
// database: every scattered read must return what the reference returns. Databases use the "C"
// collation, whose string order is the merge's (code point order).
const names = ["a", "b", "c", "ref"].map((k) => `sk_scatter_eq_${k}_${process.pid}`);
let clients: PrismaClient[] = [];
let ref: PrismaClient;
let db: ReturnType<typeof makeDb>;
function makeDb(a: PrismaClient, b: PrismaClient, c: PrismaClient) {
  const registry = createShardRegistry({
    shards: worldPlacement(a, b, c),
  });
  return a.$extends(shardRouting({ registry, models, keyless: "scatter" }));
}

beforeAll(async () => {
  // One rollout through the schema engine, then copies (CREATE DATABASE ... TEMPLATE is cheap).
  const [first, ...rest] = names as [string, ...string[]];
  await createDatabase(MAIN_PORT, first, { collation: "C" });
  await rolloutSchema({
    schema: new URL("../test/schema.prisma", import.meta.url).pathname,
    targets: [{ name: first, adapter: new PrismaPg({ connectionString: pgUrl(MAIN_PORT, first) }) }],
    onProgress: () => {},
  });
  for (const name of rest) await createDatabase(MAIN_PORT, name, { template: first });
  const all = names.map(
    (name) => new PrismaClient({ adapter: new PrismaPg({ connectionString: pgUrl(MAIN_PORT, name) }) }),
  );
  clients = all.slice(0, 3);
  ref = all[3]!;
  db = makeDb(clients[0]!, clients[1]!, clients[2]!);
}, patient(120_000));

afterAll(async () => {
  for (const client of [...clients, ref]) await client?.$disconnect();
  for (const name of names) await dropDatabase(MAIN_PORT, name);
});

const shardList = Object.values(S);
/** Short ASCII strings from an alphabet with upper and lower case (a locale collation would order them differently). */
const text = fc.string({ unit: fc.constantFrom("a", "b", "B", "Z", "_", "0"), maxLength: 3 });
const dataset = fc.array(
  fc.record({
    shard: fc.nat(shardList.length - 1),
    name: text,
    region: fc.constantFrom("eu", "mx", "us"),
    wallets: fc.array(fc.record({ balance: fc.bigInt(-4n, 4n), label: fc.option(text, { nil: null }) }), {
      maxLength: 3,
    }),
  }),
  { maxLength: 14 },
);
const direction = fc.constantFrom("asc" as const, "desc" as const);
const walletOrder = fc.array(
  fc.oneof(
    fc.record({ field: fc.constantFrom("balance", "customerId", "id"), dir: direction }),
    fc.record({
      field: fc.constant("label"),
      dir: direction,
      nulls: fc.constantFrom("first", "last", undefined),
    }),
  ),
  { maxLength: 3 },
);
const window = fc.record({
  skip: fc.option(fc.nat(5), { nil: undefined }),
  take: fc.option(fc.nat(6), { nil: undefined }),
  cursor: fc.option(fc.nat(), { nil: undefined }),
  minBalance: fc.option(fc.bigInt(-4n, 4n), { nil: undefined }),
});

type Order = { field: string; dir: "asc" | "desc"; nulls?: "first" | "last" | undefined };
const prismaOrder = (order: Order[]) => {
  const seen = new Set<string>();
  return order
    .filter((o) => !seen.has(o.field) && seen.add(o.field))
    .map((o) => ({ [o.field]: o.nulls ? { sort: o.dir, nulls: o.nulls } : o.dir }));
};
/** The reference's order: the same, made total with the id the routed client appends. */
const total = (orderBy: Record<string, unknown>[]) =>
  orderBy.some((o) => "id" in o) ? orderBy : [...orderBy, { id: "asc" }];
/** Averages compared to 12 significant digits (the database divides in numeric, the merge in double). */
const approx = (value: unknown): unknown =>
  JSON.parse(
    JSON.stringify(value, (_k, v) =>
      typeof v === "bigint"
        ? `${v}n`
        : typeof v === "number" && !Number.isInteger(v)
          ? Number(v.toPrecision(12))
          : v,
    ),
  );

type Rows = typeof dataset extends fc.Arbitrary<infer T> ? T : never;
async function load(rows: Rows) {
  for (const client of [...clients, ref]) await client.$executeRawUnsafe('TRUNCATE "Customer" CASCADE');
  const customers = rows.map((r) => ({
    id: ShardedId.generate("Customer", shardList[r.shard]!) as string,
    name: r.name,
    region: r.region,
  }));
  const wallets = rows.flatMap((r, i) =>
    r.wallets.map((w) => ({
      id: ShardedId.colocatedWith("Wallet", customers[i]!.id as never) as string,
      customerId: customers[i]!.id,
      balance: w.balance,
      label: w.label,
    })),
  );
  const clientOf = (id: string) => db.$shard(id) as unknown as PrismaClient;
  for (const client of clients) {
    const mine = <T extends { id: string }>(list: T[]) => list.filter((r) => clientOf(r.id) === client);
    await client.customer.createMany({ data: mine(customers) });
    await client.wallet.createMany({ data: mine(wallets) });
  }
  await ref.customer.createMany({ data: customers });
  await ref.wallet.createMany({ data: wallets });
  return { customers, wallets };
}

type FindArgs = {
  where?: Prisma.WalletWhereInput;
  cursor?: { id: string };
  skip?: number;
  take?: number;
  select?: { id: true; label: true };
};
/**
 * What the reference database returns for `findMany(args)` in the total order. Without a cursor
 * that is Prisma's own answer. With one it is "the rows from the cursor row on" in the reference's
 * order: Prisma's own cursor condition compares sort keys with `=` and so, on one database, drops
 * rows whose sort key is null next to the cursor (the scatter keeps them; see the README).
 */
async function reference(args: FindArgs, orderBy: Record<string, unknown>[]): Promise<unknown[]> {
  const order = total(orderBy) as Prisma.WalletOrderByWithRelationInput[];
  if (args.cursor === undefined) return ref.wallet.findMany({ ...args, orderBy: order });
  const all = await ref.wallet.findMany({ orderBy: order });
  const matching = new Set(
    (await ref.wallet.findMany({ where: args.where ?? {}, select: { id: true } })).map((r) => r.id),
  );
  const at = all.findIndex((r) => r.id === args.cursor?.id);
  const skip = args.skip ?? 0;
  const rows = (at < 0 ? [] : all.slice(at))
    .filter((r) => matching.has(r.id))
    .slice(skip, args.take === undefined ? undefined : skip + args.take);
  return args.select ? rows.map((r) => ({ id: r.id, label: r.label })) : rows;
}

describe("scattered reads equal the same reads on one database holding every row", () => {
  it(
    "findMany / findFirst with random orderBy, skip, take, cursor and where; count, aggregate, groupBy",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          dataset,
          walletOrder,
          window,
          fc.constantFrom("label", "customerId"),
          async (rows, order, w, groupField) => {
            const { wallets } = await load(rows);
            const orderBy = prismaOrder(order);
            const where: { where?: Prisma.WalletWhereInput } =
              w.minBalance === undefined ? {} : { where: { balance: { gte: w.minBalance } } };
            const cursor =
              w.cursor === undefined || wallets.length === 0
                ? {}
                : { cursor: { id: wallets[w.cursor % wallets.length]!.id } };
            // Prisma's types take no `undefined` for skip/take under exactOptionalPropertyTypes: leave them out.
            const skip = w.skip === undefined ? {} : { skip: w.skip };
            const win: { skip?: number; take?: number } = {
              ...skip,
              ...(w.take === undefined ? {} : { take: w.take }),
            };
            const args: FindArgs = { ...where, ...cursor, ...win };
            expect(await db.wallet.findMany({ ...args, orderBy } as never)).toEqual(
              await reference(args, orderBy),
            );
            const first: FindArgs = { ...where, ...cursor, ...skip };
            expect(await db.wallet.findFirst({ ...first, orderBy } as never)).toEqual(
              (await reference({ ...first, take: 1 }, orderBy))[0] ?? null,
            );
            const selected: FindArgs = { ...args, select: { id: true, label: true } };
            expect(await db.wallet.findMany({ ...selected, orderBy } as never)).toEqual(
              await reference(selected, orderBy),
            );
            // ASCII strings with upper and lower case: the "C" order of the databases and of the merge
            const byName = [{ name: order[0]?.dir ?? "asc" }, { region: "desc" }] as const;
            expect(await db.customer.findMany({ orderBy: [...byName], ...win })).toEqual(
              await ref.customer.findMany({ orderBy: [...byName, { id: "asc" }], ...win }),
            );
            const counted = { ...where, ...win };
            expect(await db.wallet.count(counted as never)).toBe(await ref.wallet.count(counted as never));
            expect(await db.customer.count({ select: { _all: true, name: true } })).toEqual(
              await ref.customer.count({ select: { _all: true, name: true } }),
            );
            const aggregates = {
              ...where,
              _count: { _all: true, label: true },
              _sum: { balance: true },
              _avg: { balance: true },
              _min: { balance: true, label: true },
              _max: { balance: true, label: true },
            } as const;
            expect(approx(await db.wallet.aggregate(aggregates as never))).toEqual(
              approx(await ref.wallet.aggregate(aggregates as never)),
            );
            const grouped = {
              by: [groupField],
              ...where,
              _count: true,
              _sum: { balance: true },
              _avg: { balance: true },
              _max: { label: true },
              orderBy: [{ _sum: { balance: "desc" } }, { [groupField]: "asc" }],
              skip: w.skip,
              take: w.take,
            } as const;
            expect(approx(await db.wallet.groupBy(grouped as never))).toEqual(
              approx(await ref.wallet.groupBy(grouped as never)),
            );
          },
        ),
        { numRuns: 40 },
      );
    },
    patient(120_000),
  );

  it(
    "pages through every row with cursor + skip 1, in the reference's order",
    async () => {
      await fc.assert(
        fc.asyncProperty(dataset, walletOrder, fc.integer({ min: 1, max: 4 }), async (rows, order, take) => {
          await load(rows);
          const orderBy = prismaOrder(order);
          const seen: string[] = [];
          let cursor: string | undefined;
          for (;;) {
            const page = await db.wallet.findMany({
              orderBy,
              take,
              ...(cursor ? { cursor: { id: cursor }, skip: 1 } : {}),
            });
            seen.push(...page.map((r) => r.id));
            if (page.length < take) break;
            cursor = page[page.length - 1]!.id;
          }
          const all = await ref.wallet.findMany({ orderBy: total(orderBy) as never, select: { id: true } });
          expect(seen).toEqual(all.map((r) => r.id));
        }),
        { numRuns: 20 },
      );
    },
    patient(120_000),
  );
});
