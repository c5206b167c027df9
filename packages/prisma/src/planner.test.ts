import { InvalidShardedIdError, ShardedId, ShardedUUID, ShardIdentifier, ShardkitError } from "@shardkit/id";
import { describe, expect, it } from "vitest";
import { models, S, worldPlacement } from "../test/layout.js";
import {
  CrossShardError,
  RoutingOptionsError,
  ScatterRefusedError,
  ShardKeyRequiredError,
  UnknownShardError,
  UnsupportedShardOperationError,
} from "./errors.js";
import { type Placed, place } from "./place.js";
import type { Obj, Plan, PlanContext, PlanTarget } from "./plan.js";
import { Planner, type PlannerOptions, routingConfig } from "./planner.js";
import type { DataModel } from "./prisma-private.js";
import { createShardRegistry } from "./registry.js";

// The planner is pure: (model, operation, args, context) -> plan. No PrismaClient, no database:
// a hand-built data model mirroring test/schema.prisma and a registry of plain objects.

const PRISMA_SCALARS = new Set([
  "String",
  "Int",
  "BigInt",
  "Float",
  "Decimal",
  "DateTime",
  "Boolean",
  "Json",
]);

/** `{ id: "String", wallets: "Wallet" }` -> the fields `dataModelOf` reads (non-scalar types are relations). */
function fields(spec: Record<string, string>): DataModel["models"][string] {
  return {
    fields: Object.fromEntries(
      Object.entries(spec).map(([name, type]) => [
        name,
        { kind: PRISMA_SCALARS.has(type) ? "scalar" : "object", type },
      ]),
    ),
  };
}

/** test/schema.prisma, field by field. */
const dataModel: DataModel = {
  models: {
    Customer: fields({ id: "String", name: "String", region: "String", wallets: "Wallet", orders: "Order" }),
    Wallet: fields({
      id: "String",
      customerId: "String",
      customer: "Customer",
      balance: "BigInt",
      label: "String",
    }),
    Order: fields({
      id: "String",
      customerId: "String",
      customer: "Customer",
      status: "String",
      total: "Int",
      items: "OrderItem",
    }),
    OrderItem: fields({ id: "String", orderId: "String", order: "Order", sku: "String", qty: "Int" }),
    Setting: fields({ id: "Int", name: "String", value: "String" }),
    OutboxEvent: fields({
      id: "String",
      topic: "String",
      aggregateId: "String",
      payload: "String",
      createdAt: "DateTime",
      status: "String",
      attempts: "Int",
      availableAt: "DateTime",
      deliveredAt: "DateTime",
      lastError: "String",
    }),
    ProcessedEvent: fields({ consumer: "String", eventId: "String", processedAt: "DateTime" }),
    IdempotencyKey: fields({
      key: "String",
      requestHash: "String",
      response: "String",
      createdAt: "DateTime",
    }),
  },
};

type ShardName = keyof typeof S;
const NAMES = Object.keys(S) as ShardName[];
const ALL = Object.values(S);
/** Which database holds each shard (written out, not read from the registry). */
const DB: Record<ShardName, number> = { g0m0: 0, g0m1: 0, g0m2: 1, g1m0: 1, g1m1: 2, g1m2: 2 };

const client = (name: string) => ({ name, $disconnect: async () => {} });
const [db0, db1, db2] = [client("db0"), client("db1"), client("db2")];
/**
 * Six logical shards on three databases, as test/world.ts: db0 0/0 0/1, db1 0/2 1/0, db2 1/1 1/2;
 * registered last first: a database's index follows its shards, not the order of registration.
 */
const registry = createShardRegistry({ shards: worldPlacement(db0, db1, db2).reverse() });
const only = client("only");
const singleRegistry = createShardRegistry({ shards: ALL.map((shard) => ({ shard, client: only })) });

/** The ID the planner fills in on a shard, fixed for the tests: a valid ShardedUUID of that shard. */
export const filledId = (shard: ShardIdentifier) =>
  `00000000-0000-7000-${(0x8000 | shard.bits).toString(16)}-000000000000`;

const planner = (options: PlannerOptions = {}, layout = registry) =>
  new Planner(dataModel, layout, { models, ...options }, filledId);

const strict = planner();
const scattering = planner({ keyless: "scatter" });
const capped = planner({ keyless: { mode: "scatter", maxShards: 2 } });
const wide = planner({ keyless: { mode: "scatter", maxShards: 3 } });
const limited = planner({ keyless: { mode: "scatter", requireLimit: true } });
/** Default refuse; Wallet scatters; Order scatters over at most 2 databases. */
const perModel = planner({
  models: {
    ...models,
    Wallet: { keys: ["id", "customerId"], keyless: "scatter" },
    Order: { keys: ["id", "customerId"], keyless: { mode: "scatter", maxShards: 2 } },
  },
});
/** Global scatter; Order refuses. */
const perModelRefuse = planner({
  keyless: "scatter",
  models: { ...models, Order: { keys: ["id", "customerId"], keyless: "refuse" } },
});
const single = planner({}, singleRegistry);

// IDs: one customer per shard, its wallets, orders and order items colocated with it.
const each = <T>(f: (name: ShardName) => T) =>
  Object.fromEntries(NAMES.map((n) => [n, f(n)])) as Record<ShardName, T>;
const C = each((n) => ShardedId.generate("Customer", S[n]) as string);
const W = each((n) => ShardedId.colocatedWith("Wallet", C[n]) as string);
const W2 = each((n) => ShardedId.colocatedWith("Wallet", C[n]) as string);
const O = each((n) => ShardedId.colocatedWith("Order", C[n]) as string);
const I = each((n) => ShardedId.colocatedWith("OrderItem", O[n]) as string);
/** A valid UUID, but version 4: not a ShardedUUID. */
const V4 = "0f8fad5b-d9cb-469f-a165-70867728950e";
/** A ShardedUUID of shard 0/9, which the registry does not have. */
const UNKNOWN = ShardedUUID.generate(ShardIdentifier.of(0, 9));
const wallet = (n: ShardName, w = W) => ({ id: w[n], customerId: C[n], balance: 1n });

// ---- the table and how a case is checked ---------------------------------------------------------

type ErrorClass = abstract new (...args: never[]) => ShardkitError;
interface TargetExpect {
  database: number;
  shards: ShardIdentifier[];
  /** The `in` values this database gets (order aside); the rest of its args must equal the call's. */
  in?: string[];
  /** The createMany rows this database gets (order aside); the rest of its args must equal the call's. */
  data?: Obj[];
}
type Expected =
  | { shard: ShardIdentifier; database: number; args?: Obj }
  /** One database; `args` are the call's own. */
  | { database: number; shards: ShardIdentifier[] }
  /** Keyless scatter: every target gets the call's own args. `in`: the targets' `in` lists are cut. */
  | { scatter: TargetExpect[]; read: string; options: Obj; field?: string }
  | { split: TargetExpect[]; field?: string }
  | { refuse: ErrorClass; code: string; message?: RegExp; check?: (error: any) => void };

interface Case {
  name: string;
  planner?: Planner;
  model: string;
  operation: string;
  args: Obj | undefined;
  context?: PlanContext;
  expect: Expected;
}

const sortStrings = (values: unknown[]) => [...(values as string[])].sort();
const sortRows = (rows: unknown[]) =>
  [...(rows as Obj[])].sort((a, b) =>
    String(a.id ?? a.customerId).localeCompare(String(b.id ?? b.customerId)),
  );

function checkTargets(
  targets: PlanTarget[],
  expected: TargetExpect[],
  args: Obj | undefined,
  field: string | undefined,
) {
  expect(targets.map((t) => t.database)).toEqual(expected.map((t) => t.database));
  targets.forEach((target, i) => {
    const want = expected[i]!;
    expect(target.shards).toEqual(want.shards);
    if (want.in !== undefined) {
      const where = target.args.where as Obj;
      const condition = where[field!] as Obj;
      expect(sortStrings(condition.in as unknown[])).toEqual(sortStrings(want.in));
      // Everything but the cut list is the call's own args.
      const original = args!.where as Obj;
      expect({ ...target.args, where: { ...where, [field!]: { ...condition, in: "cut" } } }).toEqual({
        ...args,
        where: { ...original, [field!]: { ...(original[field!] as Obj), in: "cut" } },
      });
    } else if (want.data !== undefined) {
      expect(sortRows(target.args.data as unknown[])).toEqual(sortRows(want.data));
      expect({ ...target.args, data: "cut" }).toEqual({ ...args!, data: "cut" });
    } else if (args === undefined) {
      expect(target.args).toEqual({});
    } else {
      expect(target.args).toBe(args);
    }
  });
}

/** Where a plan's shards are now, as the runner places it. */
function placed(plan: Plan, planner: Planner = strict): Placed {
  if (plan.kind === "refuse") throw new Error(`refused: ${plan.error.message}`);
  return place(plan, planner.layout);
}

function run(c: Case): Plan {
  const planner = c.planner ?? strict;
  const plan = planner.plan(c.model, c.operation, c.args, c.context);
  const e = c.expect;
  if ("refuse" in e) {
    expect(plan.kind).toBe("refuse");
    const { error } = plan as Extract<Plan, { kind: "refuse" }>;
    expect(error).toBeInstanceOf(e.refuse);
    expect(error.code).toBe(e.code);
    if (e.message) expect(error.message).toMatch(e.message);
    e.check?.(error);
  } else if ("shard" in e) {
    expect(plan).toEqual({
      kind: "shard",
      shard: e.shard,
      ...(e.args ? { args: e.args } : {}),
    });
    expect((plan as Extract<Plan, { kind: "shard" }>).shard).toBe(e.shard);
    expect(placed(plan, planner).targets.map((t) => t.database)).toEqual([e.database]);
  } else if ("scatter" in e) {
    const { shape, targets } = placed(plan, planner);
    expect(shape).toBe("scatter");
    const p = plan as Extract<Plan, { kind: "shards" }>;
    checkTargets(targets, e.scatter, c.args, e.field);
    expect(p.read?.operation).toBe(e.read);
    expect(p.options).toEqual(e.options);
  } else if ("split" in e) {
    const { shape, targets } = placed(plan, planner);
    expect(shape).toBe("split");
    checkTargets(targets, e.split, c.args, e.field);
  } else {
    const { shape, targets } = placed(plan, planner);
    expect(shape).toBe("database");
    expect(targets).toHaveLength(1);
    const [target] = targets as [PlanTarget];
    expect(target.database).toBe(e.database);
    expect(target.shards).toEqual(e.shards);
    // The call's own args: nothing cut, nothing rewritten.
    if (c.args !== undefined) expect(target.args).toBe(c.args);
  }
  return plan;
}

const refuse = (
  error: ErrorClass,
  code: string,
  message?: RegExp,
  check?: (error: any) => void,
): Expected => ({
  refuse: error,
  code,
  ...(message ? { message } : {}),
  ...(check ? { check } : {}),
});
const crossShard = (message: RegExp, ...shards: ShardIdentifier[]) =>
  refuse(CrossShardError, "CROSS_SHARD", message, (e: CrossShardError) => {
    if (shards.length > 0) expect(e.shards).toEqual(shards);
  });
const nested = /nested writes stay on the parent's shard/;
const keyRequired = (model: string, operation: string) =>
  refuse(ShardKeyRequiredError, "SHARD_KEY_REQUIRED", /names no shard/, (e: ShardKeyRequiredError) => {
    expect(e.model).toBe(model);
    expect(e.operation).toBe(operation);
  });
const unsupported = (message: RegExp) => refuse(UnsupportedShardOperationError, "UNSUPPORTED", message);
const scatterRefused = (reason: "maxShards" | "requireLimit", message: RegExp) =>
  refuse(ScatterRefusedError, "SCATTER_REFUSED", message, (e: ScatterRefusedError) =>
    expect(e.reason).toBe(reason),
  );
/** Every database, each with the call's own args. */
const everyDatabase: TargetExpect[] = [
  { database: 0, shards: [S.g0m0, S.g0m1] },
  { database: 1, shards: [S.g0m2, S.g1m0] },
  { database: 2, shards: [S.g1m1, S.g1m2] },
];

// ---- by id: every operation ----------------------------------------------------------------------

const byId: Record<string, (n: ShardName) => Obj> = {
  findUnique: (n) => ({ where: { id: W[n] } }),
  findUniqueOrThrow: (n) => ({ where: { id: W[n] }, select: { balance: true } }),
  findFirst: (n) => ({ where: { id: W[n] }, orderBy: { balance: "desc" } }),
  findFirstOrThrow: (n) => ({ where: { id: W[n] } }),
  findMany: (n) => ({ where: { id: W[n] }, take: 10, skip: 2 }),
  count: (n) => ({ where: { id: W[n] } }),
  aggregate: (n) => ({ where: { id: W[n] }, _sum: { balance: true } }),
  groupBy: (n) => ({ by: ["label"], where: { id: W[n] }, _count: { _all: true } }),
  create: (n) => ({ data: wallet(n) }),
  createMany: (n) => ({ data: [wallet(n), wallet(n, W2)] }),
  createManyAndReturn: (n) => ({ data: [wallet(n), wallet(n, W2)] }),
  update: (n) => ({ where: { id: W[n] }, data: { balance: 2n } }),
  updateMany: (n) => ({ where: { id: W[n] }, data: { label: "x" } }),
  updateManyAndReturn: (n) => ({ where: { id: W[n] }, data: { label: "x" } }),
  upsert: (n) => ({ where: { id: W[n] }, create: wallet(n), update: { balance: 3n } }),
  delete: (n) => ({ where: { id: W[n] } }),
  deleteMany: (n) => ({ where: { id: W[n] } }),
};

const byIdCases: Case[] = Object.entries(byId).flatMap(([operation, args]) =>
  NAMES.map((n) => ({
    name: `Wallet.${operation} by id on ${S[n].key} -> shard on database ${DB[n]}`,
    model: "Wallet",
    operation,
    args: args(n),
    expect: { shard: S[n], database: DB[n] },
  })),
);

const routingCases: Case[] = [
  {
    name: "Customer (default key id) by id",
    model: "Customer",
    operation: "findUnique",
    args: { where: { id: C.g1m1 } },
    expect: { shard: S.g1m1, database: 2 },
  },
  {
    name: "OutboxEvent (default key id, not configured) by id",
    model: "OutboxEvent",
    operation: "update",
    args: { where: { id: ShardedUUID.generate(S.g0m2) }, data: { status: "delivered" } },
    expect: { shard: S.g0m2, database: 1 },
  },
  {
    name: "Wallet by foreign key customerId",
    model: "Wallet",
    operation: "findMany",
    args: { where: { customerId: C.g1m1 } },
    expect: { shard: S.g1m1, database: 2 },
  },
  {
    name: "Order.count by customerId",
    model: "Order",
    operation: "count",
    args: { where: { customerId: C.g0m2 } },
    expect: { shard: S.g0m2, database: 1 },
  },
  {
    name: "OrderItem by foreign key orderId",
    model: "OrderItem",
    operation: "findMany",
    args: { where: { orderId: O.g1m0 } },
    expect: { shard: S.g1m0, database: 1 },
  },
  {
    name: "Wallet.create with only the foreign key customerId",
    model: "Wallet",
    operation: "create",
    args: { data: { customerId: C.g0m1, balance: 5n } },
    expect: {
      shard: S.g0m1,
      database: 0,
      args: { data: { customerId: C.g0m1, balance: 5n, id: filledId(S.g0m1) } },
    },
  },
  {
    name: "OrderItem.create with only orderId",
    model: "OrderItem",
    operation: "create",
    args: { data: { orderId: O.g1m2, sku: "a", qty: 1 } },
    expect: {
      shard: S.g1m2,
      database: 2,
      args: { data: { orderId: O.g1m2, sku: "a", qty: 1, id: filledId(S.g1m2) } },
    },
  },
  {
    name: "Wallet.updateMany by customerId",
    model: "Wallet",
    operation: "updateMany",
    args: { where: { customerId: C.g0m2 }, data: { label: "x" } },
    expect: { shard: S.g0m2, database: 1 },
  },
  {
    name: "where AND (a list) holding the key",
    model: "Wallet",
    operation: "findMany",
    args: { where: { AND: [{ balance: { gt: 0n } }, { customerId: C.g0m1 }] } },
    expect: { shard: S.g0m1, database: 0 },
  },
  {
    name: "where AND (an object) holding the key",
    model: "Wallet",
    operation: "deleteMany",
    args: { where: { AND: { id: W.g1m1 } } },
    expect: { shard: S.g1m1, database: 2 },
  },
  {
    name: "where AND nested in AND",
    model: "Wallet",
    operation: "count",
    args: { where: { AND: [{ label: "x" }, { AND: [{ id: W.g0m2 }] }] } },
    expect: { shard: S.g0m2, database: 1 },
  },
  {
    name: "top-level key and AND key agree",
    model: "Wallet",
    operation: "findFirst",
    args: { where: { customerId: C.g1m2, AND: [{ id: W.g1m2 }] } },
    expect: { shard: S.g1m2, database: 2 },
  },
  {
    name: "{ equals } on a key",
    model: "Wallet",
    operation: "findMany",
    args: { where: { customerId: { equals: C.g1m2 } } },
    expect: { shard: S.g1m2, database: 2 },
  },
  {
    name: "{ equals } inside AND",
    model: "Order",
    operation: "findFirst",
    args: { where: { AND: [{ id: { equals: O.g1m0 } }] } },
    expect: { shard: S.g1m0, database: 1 },
  },
  {
    name: "{ equals } on id and plain customerId that agree",
    model: "Wallet",
    operation: "findFirst",
    args: { where: { id: { equals: W.g0m2 }, customerId: C.g0m2 } },
    expect: { shard: S.g0m2, database: 1 },
  },
  {
    name: "update with data key { set } on the same shard",
    model: "Wallet",
    operation: "update",
    args: { where: { id: W.g1m0 }, data: { customerId: { set: C.g1m0 } } },
    expect: { shard: S.g1m0, database: 1 },
  },
  {
    name: "update with a plain data key on the same shard",
    model: "Wallet",
    operation: "update",
    args: { where: { id: W.g1m0 }, data: { customerId: C.g1m0 } },
    expect: { shard: S.g1m0, database: 1 },
  },
  {
    name: "upsert whose where and create agree",
    model: "Wallet",
    operation: "upsert",
    args: { where: { id: W.g0m1 }, create: wallet("g0m1"), update: { customerId: { set: C.g0m1 } } },
    expect: { shard: S.g0m1, database: 0 },
  },
  {
    name: "an in list on one shard is a shard plan",
    model: "Wallet",
    operation: "findMany",
    args: { where: { id: { in: [W.g1m1, W2.g1m1] } } },
    expect: { shard: S.g1m1, database: 2 },
  },
  {
    name: "a one-row createMany given as an object",
    model: "Wallet",
    operation: "createMany",
    args: { data: wallet("g1m2") },
    expect: { shard: S.g1m2, database: 2 },
  },
  {
    name: "nested creates and connects on the parent's shard",
    model: "Customer",
    operation: "create",
    args: {
      data: {
        id: C.g1m2,
        name: "n",
        region: "mx",
        wallets: { create: [{ id: W.g1m2 }, { id: W2.g1m2 }] },
        orders: { create: { id: O.g1m2, status: "new", total: 1, items: { create: { id: I.g1m2 } } } },
      },
    },
    expect: { shard: S.g1m2, database: 2 },
  },
  {
    name: "nested connect on the parent's shard",
    model: "Customer",
    operation: "update",
    args: { where: { id: C.g0m1 }, data: { wallets: { connect: [{ id: W.g0m1 }, { id: W2.g0m1 }] } } },
    expect: { shard: S.g0m1, database: 0 },
  },
  {
    name: "a cursor { id } on a shard plan is passed through as is",
    planner: scattering,
    model: "Wallet",
    operation: "findMany",
    args: { where: { customerId: C.g0m0 }, cursor: { id: W.g0m0 }, take: 2 },
    expect: { shard: S.g0m0, database: 0 },
  },
];

// ---- in lists: one database, several databases -----------------------------------------------------

const inCases: Case[] = [
  {
    name: "in list whose shards share a database -> database plan with the call's args",
    model: "Wallet",
    operation: "findMany",
    args: { where: { customerId: { in: [C.g0m1, C.g0m0] } }, take: 3 },
    expect: { database: 0, shards: [S.g0m0, S.g0m1] },
  },
  {
    name: "in list on database 1 -> database plan",
    model: "Order",
    operation: "count",
    args: { where: { id: { in: [O.g1m0, O.g0m2] } } },
    expect: { database: 1, shards: [S.g0m2, S.g1m0] },
  },
  {
    name: "in list over two databases -> scatter, each database exactly its values, ordered by database",
    model: "Wallet",
    operation: "findMany",
    args: {
      where: { id: { in: [W.g1m0, W.g0m0, W.g0m1, W2.g0m0] }, balance: { gt: 0n } },
      orderBy: { balance: "desc" },
      take: 5,
    },
    expect: {
      scatter: [
        { database: 0, shards: [S.g0m0, S.g0m1], in: [W.g0m0, W.g0m1, W2.g0m0] },
        { database: 1, shards: [S.g1m0], in: [W.g1m0] },
      ],
      field: "id",
      read: "findMany",
      options: {},
    },
  },
  {
    name: "in list over three databases -> scatter with three targets",
    model: "Wallet",
    operation: "count",
    args: { where: { id: { in: [W.g1m2, W.g1m1, W.g0m2, W.g0m0, W.g1m0] } } },
    expect: {
      scatter: [
        { database: 0, shards: [S.g0m0], in: [W.g0m0] },
        { database: 1, shards: [S.g0m2, S.g1m0], in: [W.g0m2, W.g1m0] },
        { database: 2, shards: [S.g1m1, S.g1m2], in: [W.g1m1, W.g1m2] },
      ],
      field: "id",
      read: "count",
      options: {},
    },
  },
  {
    name: "in list on a foreign key over three databases, other operators of the condition kept",
    model: "Order",
    operation: "aggregate",
    args: { where: { customerId: { in: [C.g1m2, C.g0m1, C.g0m2], not: C.g0m0 } }, _sum: { total: true } },
    expect: {
      scatter: [
        { database: 0, shards: [S.g0m1], in: [C.g0m1] },
        { database: 1, shards: [S.g0m2], in: [C.g0m2] },
        { database: 2, shards: [S.g1m2], in: [C.g1m2] },
      ],
      field: "customerId",
      read: "aggregate",
      options: {},
    },
  },
  {
    name: "in list over two databases: an in list scatters even when keyless reads refuse",
    planner: strict,
    model: "Wallet",
    operation: "groupBy",
    args: { by: ["label"], where: { id: { in: [W.g1m1, W.g0m1] } }, _count: { _all: true } },
    expect: {
      scatter: [
        { database: 0, shards: [S.g0m1], in: [W.g0m1] },
        { database: 2, shards: [S.g1m1], in: [W.g1m1] },
      ],
      field: "id",
      read: "groupBy",
      options: {},
    },
  },
  {
    name: "a write with an in list over two shards of one database is refused outside an action",
    model: "Wallet",
    operation: "deleteMany",
    args: { where: { id: { in: [W.g1m0, W.g0m2] } } },
    expect: crossShard(/would write to shards 0\/2, 1\/0.*not atomic/, S.g0m2, S.g1m0),
  },
  {
    name: "a write with an in list on one database with allowCrossShard -> database plan",
    model: "Wallet",
    operation: "deleteMany",
    args: { where: { id: { in: [W.g1m0, W.g0m2] } } },
    context: { allowCrossShard: true },
    expect: { database: 1, shards: [S.g0m2, S.g1m0] },
  },
  {
    name: "a write with an in list over three databases is refused outside an action",
    model: "Wallet",
    operation: "updateMany",
    args: { where: { id: { in: [W.g1m2, W.g0m0, W.g0m2] } }, data: { label: "x" } },
    expect: crossShard(/would write to shards 0\/0, 0\/2, 1\/2/, S.g0m0, S.g0m2, S.g1m2),
  },
  {
    name: "a write with an in list over three databases with allowCrossShard -> split",
    model: "Wallet",
    operation: "updateMany",
    args: { where: { id: { in: [W.g1m2, W.g0m0, W.g0m2] } }, data: { label: "x" } },
    context: { allowCrossShard: true },
    expect: {
      split: [
        { database: 0, shards: [S.g0m0], in: [W.g0m0] },
        { database: 1, shards: [S.g0m2], in: [W.g0m2] },
        { database: 2, shards: [S.g1m2], in: [W.g1m2] },
      ],
      field: "id",
    },
  },
];

// ---- createMany rows -------------------------------------------------------------------------------

const rowsOneDb = [wallet("g0m1"), wallet("g0m0"), wallet("g0m1", W2)];
const rowsThreeDb = [wallet("g1m2"), wallet("g0m0"), wallet("g0m2"), wallet("g0m1"), wallet("g0m0", W2)];
const orderRows = [
  { customerId: C.g1m1, status: "new", total: 1 },
  { customerId: C.g0m0, status: "new", total: 2 },
  { customerId: C.g1m1, status: "old", total: 3 },
];

const createManyCases: Case[] = [
  {
    name: "createMany over two shards of one database is refused outside an action",
    model: "Wallet",
    operation: "createMany",
    args: { data: rowsOneDb },
    expect: crossShard(/Wallet\.createMany would write to shards 0\/0, 0\/1.*\$action/, S.g0m0, S.g0m1),
  },
  {
    name: "createMany over two shards of one database with allowCrossShard -> database plan, every row",
    model: "Wallet",
    operation: "createMany",
    args: { data: rowsOneDb },
    context: { allowCrossShard: true },
    expect: { database: 0, shards: [S.g0m0, S.g0m1] },
  },
  {
    name: "createMany over three databases is refused outside an action",
    model: "Wallet",
    operation: "createMany",
    args: { data: rowsThreeDb, skipDuplicates: true },
    expect: crossShard(/would write to shards 0\/0, 0\/1, 0\/2, 1\/2/, S.g0m0, S.g0m1, S.g0m2, S.g1m2),
  },
  {
    name: "createMany over three databases with allowCrossShard -> split, each database exactly its rows",
    model: "Wallet",
    operation: "createMany",
    args: { data: rowsThreeDb, skipDuplicates: true },
    context: { allowCrossShard: true },
    expect: {
      split: [
        { database: 0, shards: [S.g0m0, S.g0m1], data: [wallet("g0m0"), wallet("g0m1"), wallet("g0m0", W2)] },
        { database: 1, shards: [S.g0m2], data: [wallet("g0m2")] },
        { database: 2, shards: [S.g1m2], data: [wallet("g1m2")] },
      ],
    },
  },
  {
    name: "createManyAndReturn over two databases with allowCrossShard -> split",
    model: "Wallet",
    operation: "createManyAndReturn",
    args: { data: [wallet("g1m0"), wallet("g1m1")], select: { id: true } },
    context: { allowCrossShard: true },
    expect: {
      split: [
        { database: 1, shards: [S.g1m0], data: [wallet("g1m0")] },
        { database: 2, shards: [S.g1m1], data: [wallet("g1m1")] },
      ],
    },
  },
  {
    name: "Order rows routed by customerId alone, split over two databases",
    model: "Order",
    operation: "createMany",
    args: { data: orderRows },
    context: { allowCrossShard: true },
    expect: {
      split: [
        { database: 0, shards: [S.g0m0], data: [{ ...orderRows[1]!, id: filledId(S.g0m0) }] },
        {
          database: 2,
          shards: [S.g1m1],
          data: [
            { ...orderRows[0]!, id: filledId(S.g1m1) },
            { ...orderRows[2]!, id: filledId(S.g1m1) },
          ],
        },
      ],
    },
  },
  {
    name: "a createMany row without keys is refused",
    model: "Wallet",
    operation: "createMany",
    args: { data: [wallet("g0m0"), { balance: 1n }] },
    context: { allowCrossShard: true },
    expect: refuse(
      ShardKeyRequiredError,
      "SHARD_KEY_REQUIRED",
      /Wallet\.createMany data\[1\] names no shard/,
    ),
  },
  {
    name: "a createMany row whose keys disagree is refused",
    model: "Wallet",
    operation: "createMany",
    args: { data: [wallet("g0m0"), { id: W.g0m1, customerId: C.g1m1 }] },
    context: { allowCrossShard: true },
    expect: crossShard(/data\[1\]: keys disagree/, S.g0m1, S.g1m1),
  },
];

// ---- inside a transaction ----------------------------------------------------------------------------

const withinCases: Case[] = [
  {
    name: "within 0/0: the same shard -> shard plan",
    model: "Wallet",
    operation: "findUnique",
    args: { where: { id: W.g0m0 } },
    context: { within: S.g0m0 },
    expect: { shard: S.g0m0, database: 0 },
  },
  {
    name: "within 1/1: a keyless read runs on the transaction's shard",
    model: "Wallet",
    operation: "findMany",
    args: { where: { balance: { gt: 0n } } },
    context: { within: S.g1m1 },
    expect: { shard: S.g1m1, database: 2 },
  },
  {
    name: "within 1/0: a keyless write runs on the transaction's shard",
    model: "Wallet",
    operation: "updateMany",
    args: { where: { label: "x" }, data: { label: "y" } },
    context: { within: S.g1m0 },
    expect: { shard: S.g1m0, database: 1 },
  },
  {
    name: "within 1/2: a model without keys (Setting) runs on the transaction's shard",
    model: "Setting",
    operation: "create",
    args: { data: { name: "a", value: "b" } },
    context: { within: S.g1m2 },
    expect: { shard: S.g1m2, database: 2 },
  },
  {
    name: "within 0/1: no args at all",
    model: "Setting",
    operation: "findMany",
    args: undefined,
    context: { within: S.g0m1 },
    expect: { shard: S.g0m1, database: 0 },
  },
  {
    name: "within 0/0: an in list on the transaction's shard -> shard plan",
    model: "Wallet",
    operation: "findMany",
    args: { where: { id: { in: [W.g0m0, W2.g0m0] } } },
    context: { within: S.g0m0 },
    expect: { shard: S.g0m0, database: 0 },
  },
  {
    name: "within 0/0: another shard on the same database is refused",
    model: "Wallet",
    operation: "update",
    args: { where: { id: W.g0m1 }, data: { balance: 1n } },
    context: { within: S.g0m0 },
    expect: crossShard(/names shard 0\/1 inside a transaction on shard 0\/0/, S.g0m0, S.g0m1),
  },
  {
    name: "within 0/0: a shard on another database is refused",
    model: "Wallet",
    operation: "findUnique",
    args: { where: { id: W.g1m2 } },
    context: { within: S.g0m0 },
    expect: crossShard(/names shard 1\/2 inside a transaction on shard 0\/0/, S.g0m0, S.g1m2),
  },
  {
    name: "within 0/0: an in list that includes another shard is refused",
    model: "Wallet",
    operation: "findMany",
    args: { where: { id: { in: [W.g0m0, W.g0m1] } } },
    context: { within: S.g0m0 },
    expect: crossShard(/names shard 0\/1 inside a transaction on shard 0\/0/, S.g0m0, S.g0m1),
  },
  {
    name: "within 1/1: createMany rows of another shard are refused, even with allowCrossShard",
    model: "Wallet",
    operation: "createMany",
    args: { data: [wallet("g1m1"), wallet("g1m2")] },
    context: { within: S.g1m1, allowCrossShard: true },
    expect: crossShard(/inside a transaction on shard 1\/1/, S.g1m1, S.g1m2),
  },
  {
    name: "within 0/2: a nested create on another shard is refused",
    model: "Order",
    operation: "create",
    args: { data: { id: O.g0m2, customerId: C.g0m2, items: { create: { id: I.g1m0, sku: "a", qty: 1 } } } },
    context: { within: S.g0m2 },
    expect: crossShard(nested, S.g0m2, S.g1m0),
  },
  {
    name: "within 0/0: keys that disagree are refused",
    model: "Wallet",
    operation: "findFirst",
    args: { where: { id: W.g0m0, customerId: C.g1m1 } },
    context: { within: S.g0m0 },
    expect: crossShard(/keys disagree/, S.g0m0, S.g1m1),
  },
  {
    name: "within 0/0: a v4 UUID is refused",
    model: "Wallet",
    operation: "findUnique",
    args: { where: { id: V4 } },
    context: { within: S.g0m0 },
    expect: refuse(InvalidShardedIdError, "INVALID_SHARDED_ID"),
  },
  {
    name: "within 0/0: an ID of an unregistered shard is refused",
    model: "Wallet",
    operation: "findUnique",
    args: { where: { id: UNKNOWN } },
    context: { within: S.g0m0 },
    expect: refuse(UnknownShardError, "UNKNOWN_SHARD"),
  },
];

// ---- refusals: disagreeing keys, nested writes, bad IDs ---------------------------------------------

const refusalCases: Case[] = [
  {
    name: "where keys that disagree (id vs customerId)",
    model: "Wallet",
    operation: "findFirst",
    args: { where: { id: W.g0m0, customerId: C.g1m2 } },
    expect: crossShard(/Wallet\.findFirst: keys disagree: id names shard 0\/0, customerId names shard 1\/2/),
  },
  {
    name: "create data keys that disagree (same database, other shard)",
    model: "Wallet",
    operation: "create",
    args: { data: { id: W.g0m0, customerId: C.g0m1 } },
    expect: crossShard(/keys disagree/, S.g0m0, S.g0m1),
  },
  {
    name: "where key and AND key that disagree",
    model: "Wallet",
    operation: "count",
    args: { where: { customerId: C.g0m0, AND: [{ id: W.g0m2 }] } },
    expect: crossShard(/keys disagree/, S.g0m0, S.g0m2),
  },
  {
    name: "{ equals } and a plain key that disagree",
    model: "Order",
    operation: "findMany",
    args: { where: { id: { equals: O.g1m1 }, customerId: C.g1m2 } },
    expect: crossShard(/keys disagree/, S.g1m1, S.g1m2),
  },
  {
    name: "upsert where and create that disagree",
    model: "Wallet",
    operation: "upsert",
    args: { where: { id: W.g0m0 }, create: wallet("g1m1"), update: {} },
    expect: crossShard(/Wallet\.upsert: keys disagree: where names shard 0\/0, create names shard 1\/1/),
  },
  {
    name: "update moving a wallet to another shard's customer (data key)",
    model: "Wallet",
    operation: "update",
    args: { where: { id: W.g0m0 }, data: { customerId: C.g1m0 } },
    expect: crossShard(nested, S.g0m0, S.g1m0),
  },
  {
    name: "update with a { set } data key on another shard",
    model: "Wallet",
    operation: "update",
    args: { where: { id: W.g1m1 }, data: { customerId: { set: C.g1m2 } } },
    expect: crossShard(
      /Wallet\.customerId names shard 1\/2, but the operation runs on shard 1\/1/,
      S.g1m1,
      S.g1m2,
    ),
  },
  {
    name: "upsert whose update moves to another shard",
    model: "Wallet",
    operation: "upsert",
    args: { where: { id: W.g0m2 }, create: wallet("g0m2"), update: { customerId: { set: C.g1m0 } } },
    expect: crossShard(nested, S.g0m2, S.g1m0),
  },
  {
    name: "nested create of a wallet on another database",
    model: "Customer",
    operation: "create",
    args: {
      data: { id: C.g0m0, name: "n", region: "eu", wallets: { create: [{ id: W.g0m0 }, { id: W.g1m1 }] } },
    },
    expect: crossShard(nested, S.g0m0, S.g1m1),
  },
  {
    name: "nested create of a wallet on another shard of the same database",
    model: "Customer",
    operation: "create",
    args: { data: { id: C.g0m0, name: "n", region: "eu", wallets: { create: { id: W.g0m1 } } } },
    expect: crossShard(/Customer\.create wallets\.create: Wallet\.id names shard 0\/1/, S.g0m0, S.g0m1),
  },
  {
    name: "nested connect of another shard's wallet",
    model: "Customer",
    operation: "update",
    args: { where: { id: C.g0m0 }, data: { wallets: { connect: { id: W.g0m1 } } } },
    expect: crossShard(/wallets\.connect.*nested writes stay on the parent's shard/, S.g0m0, S.g0m1),
  },
  {
    name: "nested connect list with one wallet of another database",
    model: "Customer",
    operation: "update",
    args: { where: { id: C.g0m0 }, data: { wallets: { connect: [{ id: W.g0m0 }, { id: W.g1m2 }] } } },
    expect: crossShard(nested, S.g0m0, S.g1m2),
  },
  {
    name: "nested connect of the parent relation on another shard",
    model: "Order",
    operation: "update",
    args: { where: { id: O.g1m1 }, data: { customer: { connect: { id: C.g0m0 } } } },
    expect: crossShard(nested, S.g1m1, S.g0m0),
  },
  {
    name: "create with a relation connect on another shard",
    model: "Wallet",
    operation: "create",
    args: { data: { id: W.g0m0, customer: { connect: { id: C.g0m1 } } } },
    expect: crossShard(nested, S.g0m0, S.g0m1),
  },
  {
    name: "nested createMany with a row on another shard",
    model: "Order",
    operation: "create",
    args: {
      data: {
        id: O.g0m0,
        customerId: C.g0m0,
        items: { createMany: { data: [{ id: I.g0m0 }, { id: I.g1m0 }] } },
      },
    },
    expect: crossShard(nested, S.g0m0, S.g1m0),
  },
  {
    name: "nested connectOrCreate on another shard of the same database",
    model: "Customer",
    operation: "upsert",
    args: {
      where: { id: C.g0m2 },
      create: {
        id: C.g0m2,
        name: "n",
        region: "eu",
        wallets: { connectOrCreate: { where: { id: W.g1m0 }, create: { id: W.g1m0 } } },
      },
      update: {},
    },
    expect: crossShard(nested, S.g0m2, S.g1m0),
  },
  {
    name: "nested update of another shard's wallet",
    model: "Customer",
    operation: "update",
    args: {
      where: { id: C.g0m0 },
      data: { wallets: { update: { where: { id: W.g1m1 }, data: { balance: 1n } } } },
    },
    expect: crossShard(nested, S.g0m0, S.g1m1),
  },
  {
    name: "nested deleteMany with an in list reaching another shard",
    model: "Customer",
    operation: "update",
    args: { where: { id: C.g0m0 }, data: { wallets: { deleteMany: { id: { in: [W.g0m0, W.g1m1] } } } } },
    expect: crossShard(nested, S.g0m0, S.g1m1),
  },
  {
    name: "a doubly nested create on another shard",
    model: "Customer",
    operation: "create",
    args: {
      data: {
        id: C.g1m2,
        name: "n",
        region: "mx",
        orders: { create: { id: O.g1m2, status: "new", total: 1, items: { create: { id: I.g0m0 } } } },
      },
    },
    expect: crossShard(/orders\.create items\.create.*OrderItem\.id names shard 0\/0/, S.g1m2, S.g0m0),
  },
  {
    name: "a v4 UUID in where",
    model: "Wallet",
    operation: "findUnique",
    args: { where: { id: V4 } },
    expect: refuse(InvalidShardedIdError, "INVALID_SHARDED_ID", /Invalid sharded ID/, (e) =>
      expect(e.value).toBe(V4),
    ),
  },
  {
    name: "a v4 UUID in create data",
    model: "Wallet",
    operation: "create",
    args: { data: { id: V4, customerId: C.g0m0 } },
    expect: refuse(InvalidShardedIdError, "INVALID_SHARDED_ID"),
  },
  {
    name: "a v4 UUID in an in list",
    model: "Wallet",
    operation: "findMany",
    args: { where: { id: { in: [W.g0m0, V4] } } },
    expect: refuse(InvalidShardedIdError, "INVALID_SHARDED_ID"),
  },
  {
    name: "a v4 UUID in a nested connect",
    model: "Customer",
    operation: "update",
    args: { where: { id: C.g0m0 }, data: { wallets: { connect: { id: V4 } } } },
    expect: refuse(InvalidShardedIdError, "INVALID_SHARDED_ID"),
  },
  {
    name: "not a UUID at all",
    model: "Order",
    operation: "delete",
    args: { where: { id: "order-1" } },
    expect: refuse(InvalidShardedIdError, "INVALID_SHARDED_ID"),
  },
  {
    name: "an ID of a shard not in the registry",
    model: "Wallet",
    operation: "findUnique",
    args: { where: { id: UNKNOWN } },
    expect: refuse(UnknownShardError, "UNKNOWN_SHARD", /Shard 0\/9 is not in the registry/, (e) =>
      expect(e.shard).toBe(ShardIdentifier.of(0, 9)),
    ),
  },
  {
    name: "an unknown shard in an in list",
    model: "Wallet",
    operation: "findMany",
    args: { where: { id: { in: [W.g0m0, UNKNOWN] } } },
    expect: refuse(UnknownShardError, "UNKNOWN_SHARD"),
  },
  {
    name: "an unknown shard in createMany rows",
    model: "Wallet",
    operation: "createMany",
    args: { data: [wallet("g0m0"), { id: UNKNOWN, customerId: UNKNOWN }] },
    context: { allowCrossShard: true },
    expect: refuse(UnknownShardError, "UNKNOWN_SHARD"),
  },
  {
    name: "update changing the id to another shard's",
    model: "Wallet",
    operation: "update",
    args: { where: { id: W.g0m0 }, data: { id: W.g1m1 } },
    expect: crossShard(nested, S.g0m0, S.g1m1),
  },
  {
    name: "within an unregistered shard",
    model: "Setting",
    operation: "findMany",
    args: {},
    context: { within: ShardIdentifier.of(0, 9) },
    expect: refuse(UnknownShardError, "UNKNOWN_SHARD"),
  },
];

// ---- keyless-where writes inside a transaction ---------------------------------------------------

/**
 * A write whose `where` names no shard runs on the transaction's shard, so what its `data` writes
 * (a key field, a nested connect) must name that shard too: otherwise, with 0/1 on the same
 * database, the statement would succeed and a wallet of 0/0 would point at another shard's customer.
 */
const gapCases: Case[] = [
  {
    name: "within 0/0: keyless updateMany whose data key names 1/1",
    model: "Wallet",
    operation: "updateMany",
    args: { where: { label: "x" }, data: { customerId: C.g1m1 } },
    context: { within: S.g0m0 },
    expect: crossShard(/1\/1/),
  },
  {
    name: "within 0/0: keyless updateMany whose data key names 0/1 (same database)",
    model: "Order",
    operation: "updateMany",
    args: { where: { status: "new" }, data: { customerId: { set: C.g0m1 } } },
    context: { within: S.g0m0 },
    expect: crossShard(/0\/1/),
  },
  {
    name: "within 0/0: keyless update whose nested connect names 1/2",
    model: "Wallet",
    operation: "update",
    args: { where: { label: "x" }, data: { customer: { connect: { id: C.g1m2 } } } },
    context: { within: S.g0m0 },
    expect: crossShard(nested),
  },
];

// ---- keyless: refused, scattered, guarded --------------------------------------------------------------

const keylessCases: Case[] = [
  // default policy: refuse
  {
    name: "default: keyless findMany is refused",
    model: "Wallet",
    operation: "findMany",
    args: { where: { balance: { gt: 0n } } },
    expect: keyRequired("Wallet", "findMany"),
  },
  {
    name: "default: no args at all",
    model: "Wallet",
    operation: "findMany",
    args: undefined,
    expect: keyRequired("Wallet", "findMany"),
  },
  {
    name: "default: OR of ids names no single shard",
    model: "Wallet",
    operation: "findMany",
    args: { where: { OR: [{ id: W.g0m0 }, { id: W.g1m1 }] } },
    expect: keyRequired("Wallet", "findMany"),
  },
  {
    name: "default: NOT id names no shard",
    model: "Wallet",
    operation: "findFirst",
    args: { where: { NOT: { id: W.g0m0 } } },
    expect: keyRequired("Wallet", "findFirst"),
  },
  {
    name: "default: { not } on id names no shard",
    model: "Wallet",
    operation: "count",
    args: { where: { id: { not: W.g0m0 } } },
    expect: keyRequired("Wallet", "count"),
  },
  {
    name: "default: an in list inside AND is not routed",
    model: "Wallet",
    operation: "findMany",
    args: { where: { AND: [{ id: { in: [W.g0m0, W.g1m1] } }] } },
    expect: keyRequired("Wallet", "findMany"),
  },
  {
    name: "default: an empty in list names no shard",
    model: "Wallet",
    operation: "findMany",
    args: { where: { id: { in: [] } } },
    expect: refuse(ShardKeyRequiredError, "SHARD_KEY_REQUIRED", /where\.id\.in is empty/),
  },
  {
    name: "default: keyless aggregate",
    model: "Order",
    operation: "aggregate",
    args: { _sum: { total: true } },
    expect: keyRequired("Order", "aggregate"),
  },
  {
    name: "default: keyless groupBy",
    model: "Order",
    operation: "groupBy",
    args: { by: ["status"], _count: { _all: true }, take: 2 },
    expect: keyRequired("Order", "groupBy"),
  },
  {
    name: "default: Setting (no keys)",
    model: "Setting",
    operation: "findMany",
    args: {},
    expect: refuse(ShardKeyRequiredError, "SHARD_KEY_REQUIRED", /Setting has no shard key fields/),
  },
  {
    name: "default: a keyless create",
    model: "Wallet",
    operation: "create",
    args: { data: { balance: 1n } },
    expect: refuse(
      ShardKeyRequiredError,
      "SHARD_KEY_REQUIRED",
      /data has none of its key fields \(id, customerId\)/,
    ),
  },
  // keyless: "scatter" still refuses writes, findUnique and models without keys
  {
    name: "scatter: Setting (no keys) is still refused",
    planner: scattering,
    model: "Setting",
    operation: "findMany",
    args: {},
    expect: keyRequired("Setting", "findMany"),
  },
  {
    name: "scatter: IdempotencyKey (no id field, no keys) is refused",
    planner: scattering,
    model: "IdempotencyKey",
    operation: "count",
    args: {},
    expect: keyRequired("IdempotencyKey", "count"),
  },
  {
    name: "scatter: ProcessedEvent (no keys) is refused",
    planner: scattering,
    model: "ProcessedEvent",
    operation: "findFirst",
    args: { where: { consumer: "c" } },
    expect: keyRequired("ProcessedEvent", "findFirst"),
  },
  {
    name: "scatter: a keyless updateMany is refused",
    planner: scattering,
    model: "Wallet",
    operation: "updateMany",
    args: { where: { balance: { lt: 0n } }, data: { label: "x" } },
    expect: keyRequired("Wallet", "updateMany"),
  },
  {
    name: "scatter: a keyless deleteMany is refused",
    planner: scattering,
    model: "Order",
    operation: "deleteMany",
    args: {},
    expect: keyRequired("Order", "deleteMany"),
  },
  {
    name: "scatter: a keyless create is refused",
    planner: scattering,
    model: "Wallet",
    operation: "create",
    args: { data: { balance: 1n } },
    expect: keyRequired("Wallet", "create"),
  },
  {
    name: "scatter: a keyless update is refused",
    planner: scattering,
    model: "Wallet",
    operation: "update",
    args: { where: { label: "x" }, data: { balance: 1n } },
    expect: keyRequired("Wallet", "update"),
  },
  {
    name: "scatter: createMany with no rows is refused",
    planner: scattering,
    model: "Wallet",
    operation: "createMany",
    args: { data: [] },
    expect: refuse(ShardKeyRequiredError, "SHARD_KEY_REQUIRED", /createMany with no rows/),
  },
  {
    name: "scatter: a keyless findUnique is refused",
    planner: scattering,
    model: "Wallet",
    operation: "findUnique",
    args: { where: { label: "x" } },
    expect: keyRequired("Wallet", "findUnique"),
  },
  {
    name: "scatter: a keyless findUniqueOrThrow is refused",
    planner: scattering,
    model: "Customer",
    operation: "findUniqueOrThrow",
    args: { where: { name: "x" } },
    expect: keyRequired("Customer", "findUniqueOrThrow"),
  },
  // keyless: "scatter": reads over every database
  ...(
    [
      ["Wallet", "findMany", { where: { balance: { gt: 0n } }, take: 10 }, "findMany"],
      ["Wallet", "findMany", undefined, "findMany"],
      ["Wallet", "findFirst", { where: { label: "x" } }, "findMany"],
      ["Wallet", "findFirstOrThrow", { orderBy: { balance: "desc" } }, "findMany"],
      ["Order", "count", { where: { status: "new" } }, "count"],
      ["Order", "aggregate", { _sum: { total: true }, _avg: { total: true } }, "aggregate"],
      ["Order", "groupBy", { by: ["status"], _count: { _all: true } }, "groupBy"],
      ["Customer", "findMany", { where: { region: "eu" } }, "findMany"],
      ["OutboxEvent", "findMany", { where: { status: "pending" }, take: 50 }, "findMany"],
      ["Wallet", "findMany", { cursor: { id: W.g1m1 }, take: 2 }, "findMany"],
    ] as const
  ).map(
    ([model, operation, args, read]): Case => ({
      name: `scatter: keyless ${model}.${operation} ${JSON.stringify(args ?? null, (_, v) => (typeof v === "bigint" ? `${v}n` : v))} over every database`,
      planner: scattering,
      model,
      operation,
      args: args as Obj | undefined,
      expect: { scatter: everyDatabase, read, options: { mode: "scatter" } },
    }),
  ),
  // guards
  {
    name: "maxShards 2: a keyless read over three databases is refused",
    planner: capped,
    model: "Wallet",
    operation: "findMany",
    args: { take: 5 },
    expect: scatterRefused("maxShards", /would scatter over 3 databases.*more than maxShards 2/),
  },
  {
    name: "maxShards 3: a keyless read over three databases scatters",
    planner: wide,
    model: "Wallet",
    operation: "count",
    args: {},
    expect: { scatter: everyDatabase, read: "count", options: { mode: "scatter", maxShards: 3 } },
  },
  {
    name: "requireLimit: findMany without take is refused",
    planner: limited,
    model: "Wallet",
    operation: "findMany",
    args: { where: { label: "x" } },
    expect: scatterRefused("requireLimit", /without `take`/),
  },
  {
    name: "requireLimit: groupBy without take is refused",
    planner: limited,
    model: "Order",
    operation: "groupBy",
    args: { by: ["status"], _count: { _all: true } },
    expect: scatterRefused("requireLimit", /requireLimit/),
  },
  {
    name: "requireLimit: findMany with take scatters",
    planner: limited,
    model: "Wallet",
    operation: "findMany",
    args: { take: 3 },
    expect: { scatter: everyDatabase, read: "findMany", options: { mode: "scatter", requireLimit: true } },
  },
  {
    name: "requireLimit: count needs no take",
    planner: limited,
    model: "Wallet",
    operation: "count",
    args: {},
    expect: { scatter: everyDatabase, read: "count", options: { mode: "scatter", requireLimit: true } },
  },
  {
    name: "requireLimit: findFirst needs no take",
    planner: limited,
    model: "Wallet",
    operation: "findFirst",
    args: {},
    expect: { scatter: everyDatabase, read: "findMany", options: { mode: "scatter", requireLimit: true } },
  },
  // per-call scatter options
  {
    name: "per call: $scatter({}) on a refusing client scatters",
    planner: strict,
    model: "Wallet",
    operation: "findMany",
    args: { take: 1 },
    context: { scatter: {} },
    expect: { scatter: everyDatabase, read: "findMany", options: {} },
  },
  {
    name: "per call: $scatter({ policy: 'partial' }) on a refusing client",
    planner: strict,
    model: "Order",
    operation: "aggregate",
    args: { _count: true },
    context: { scatter: { policy: "partial" } },
    expect: { scatter: everyDatabase, read: "aggregate", options: { policy: "partial" } },
  },
  {
    name: "per call: maxShards 3 overrides the client's maxShards 2",
    planner: capped,
    model: "Wallet",
    operation: "findMany",
    args: {},
    context: { scatter: { maxShards: 3 } },
    expect: { scatter: everyDatabase, read: "findMany", options: { mode: "scatter", maxShards: 3 } },
  },
  {
    name: "per call: requireLimit false overrides the client's requireLimit",
    planner: limited,
    model: "Wallet",
    operation: "findMany",
    args: {},
    context: { scatter: { requireLimit: false } },
    expect: { scatter: everyDatabase, read: "findMany", options: { mode: "scatter", requireLimit: false } },
  },
  {
    name: "per call: maxShards 1 on a scattering client is refused",
    planner: scattering,
    model: "Wallet",
    operation: "count",
    args: {},
    context: { scatter: { maxShards: 1 } },
    expect: scatterRefused("maxShards", /more than maxShards 1/),
  },
  {
    name: "per call: requireLimit on a scattering client is refused without take",
    planner: scattering,
    model: "Wallet",
    operation: "findMany",
    args: {},
    context: { scatter: { requireLimit: true } },
    expect: scatterRefused("requireLimit", /without `take`/),
  },
  {
    name: "per call: a model without keys is still refused",
    planner: strict,
    model: "Setting",
    operation: "findMany",
    args: {},
    context: { scatter: {} },
    expect: keyRequired("Setting", "findMany"),
  },
  {
    name: "per call: a keyless write is still refused",
    planner: strict,
    model: "Wallet",
    operation: "deleteMany",
    args: {},
    context: { scatter: {} },
    expect: keyRequired("Wallet", "deleteMany"),
  },
  // per-model keyless
  {
    name: "per model: Wallet scatters on a refusing client",
    planner: perModel,
    model: "Wallet",
    operation: "findMany",
    args: {},
    expect: { scatter: everyDatabase, read: "findMany", options: { mode: "scatter" } },
  },
  {
    name: "per model: Order's own maxShards 2 refuses",
    planner: perModel,
    model: "Order",
    operation: "count",
    args: {},
    expect: scatterRefused("maxShards", /Order\.count: .*more than maxShards 2/),
  },
  {
    name: "per model: Customer follows the client's default (refuse)",
    planner: perModel,
    model: "Customer",
    operation: "findMany",
    args: {},
    expect: keyRequired("Customer", "findMany"),
  },
  {
    name: "per model: Order 'refuse' on a scattering client",
    planner: perModelRefuse,
    model: "Order",
    operation: "findMany",
    args: { take: 1 },
    expect: keyRequired("Order", "findMany"),
  },
  {
    name: "per model: Wallet follows the scattering client",
    planner: perModelRefuse,
    model: "Wallet",
    operation: "findMany",
    args: { take: 1 },
    expect: { scatter: everyDatabase, read: "findMany", options: { mode: "scatter" } },
  },
  {
    name: "per model: per-call options override a model's 'refuse'",
    planner: perModelRefuse,
    model: "Order",
    operation: "findMany",
    args: { take: 1 },
    context: { scatter: { deadlineMs: 100 } },
    expect: { scatter: everyDatabase, read: "findMany", options: { deadlineMs: 100 } },
  },
];

// ---- one database: keyless is one statement -------------------------------------------------------

const singleCases: Case[] = [
  {
    name: "single database: a keyless read -> database plan over every shard",
    planner: single,
    model: "Wallet",
    operation: "findMany",
    args: { where: { balance: { gt: 0n } } },
    expect: { database: 0, shards: ALL },
  },
  {
    name: "single database: a keyless write -> database plan",
    planner: single,
    model: "Wallet",
    operation: "updateMany",
    args: { where: { label: "x" }, data: { label: "y" } },
    expect: { database: 0, shards: ALL },
  },
  {
    name: "single database: a keyless findUnique -> database plan",
    planner: single,
    model: "Wallet",
    operation: "findUnique",
    args: { where: { label: "x" } },
    expect: { database: 0, shards: ALL },
  },
  {
    name: "single database: Setting (no keys) -> database plan",
    planner: single,
    model: "Setting",
    operation: "create",
    args: { data: { name: "a", value: "b" } },
    expect: { database: 0, shards: ALL },
  },
  {
    name: "single database: by id -> shard plan on database 0",
    planner: single,
    model: "Wallet",
    operation: "findUnique",
    args: { where: { id: W.g1m2 } },
    expect: { shard: S.g1m2, database: 0 },
  },
  {
    name: "single database: an in list over shards -> database plan with the call's args",
    planner: single,
    model: "Wallet",
    operation: "findMany",
    args: { where: { id: { in: [W.g1m2, W.g0m0] } } },
    expect: { database: 0, shards: [S.g0m0, S.g1m2] },
  },
  {
    name: "single database: createMany over shards with allowCrossShard -> database plan",
    planner: single,
    model: "Wallet",
    operation: "createMany",
    args: { data: rowsThreeDb },
    context: { allowCrossShard: true },
    expect: { database: 0, shards: [S.g0m0, S.g0m1, S.g0m2, S.g1m2] },
  },
  {
    name: "single database: createMany over shards outside an action is refused",
    planner: single,
    model: "Wallet",
    operation: "createMany",
    args: { data: rowsThreeDb },
    expect: crossShard(/not atomic/),
  },
];

// ---- shapes that cannot be merged across databases ------------------------------------------------

const walletIdOnly = planner({ keyless: "scatter", models: { ...models, Wallet: { keys: ["customerId"] } } });
const unsupportedCases: Case[] = [
  {
    name: "findMany with distinct",
    planner: scattering,
    model: "Wallet",
    operation: "findMany",
    args: { distinct: ["label"] },
    expect: unsupported(/distinct across shards is not supported/),
  },
  {
    name: "count with distinct",
    planner: scattering,
    model: "Wallet",
    operation: "count",
    args: { distinct: ["label"] },
    expect: unsupported(/cursor or distinct/),
  },
  {
    name: "groupBy with having",
    planner: scattering,
    model: "Order",
    operation: "groupBy",
    args: { by: ["status"], having: { total: { _sum: { gt: 10 } } }, _sum: { total: true } },
    expect: unsupported(/with having across shards is not supported/),
  },
  {
    name: "groupBy by a relation",
    planner: scattering,
    model: "Wallet",
    operation: "groupBy",
    args: { by: ["customer"], _count: { _all: true } },
    expect: unsupported(/groupBy across shards by customer/),
  },
  {
    name: "groupBy ordered by a field not in by",
    planner: scattering,
    model: "Order",
    operation: "groupBy",
    args: { by: ["status"], orderBy: { total: "asc" }, _count: { _all: true } },
    expect: unsupported(/orderBy total must be one of by or an aggregate/),
  },
  {
    name: "orderBy on a relation field",
    planner: scattering,
    model: "Wallet",
    operation: "findMany",
    args: { orderBy: { customer: { name: "asc" } } },
    expect: unsupported(/orderBy customer across shards is not supported/),
  },
  {
    name: "orderBy a relation aggregate",
    planner: scattering,
    model: "Order",
    operation: "findMany",
    args: { orderBy: [{ total: "desc" }, { items: { _count: "desc" } }] },
    expect: unsupported(/orderBy items/),
  },
  {
    name: "negative take",
    planner: scattering,
    model: "Wallet",
    operation: "findMany",
    args: { take: -5 },
    expect: unsupported(/negative take reads backwards/),
  },
  {
    name: "negative skip",
    planner: scattering,
    model: "Wallet",
    operation: "findMany",
    args: { skip: -1 },
    expect: unsupported(/skip must be an integer >= 0/),
  },
  {
    name: "findFirst with take 2",
    planner: scattering,
    model: "Wallet",
    operation: "findFirst",
    args: { take: 2 },
    expect: unsupported(/take must be 1/),
  },
  {
    name: "a cursor on another field than id",
    planner: scattering,
    model: "Wallet",
    operation: "findMany",
    args: { cursor: { customerId: C.g0m0 }, take: 2 },
    expect: unsupported(/a cursor across shards must be \{ id: <ShardedUUID> \}/),
  },
  {
    name: "a cursor with id and another field",
    planner: scattering,
    model: "Wallet",
    operation: "findMany",
    args: { cursor: { id: W.g0m0, customerId: C.g0m0 }, take: 2 },
    expect: unsupported(/a cursor across shards must be/),
  },
  {
    name: "a cursor whose id is not a ShardedUUID",
    planner: scattering,
    model: "Wallet",
    operation: "findMany",
    args: { cursor: { id: V4 }, take: 2 },
    expect: unsupported(/a cursor across shards must be/),
  },
  {
    name: "_sum of a String",
    planner: scattering,
    model: "Wallet",
    operation: "aggregate",
    args: { _sum: { label: true } },
    expect: unsupported(/_sum\.label across shards is not supported \(String values/),
  },
  {
    name: "_avg of a String",
    planner: scattering,
    model: "Order",
    operation: "aggregate",
    args: { _avg: { status: true } },
    expect: unsupported(/_avg\.status/),
  },
  {
    name: "aggregate over a take window",
    planner: scattering,
    model: "Order",
    operation: "aggregate",
    args: { _sum: { total: true }, take: 5 },
    expect: unsupported(/cursor\/skip\/take window/),
  },
  {
    name: "findMany ordered or windowed when id is not a shard key (no tiebreaker)",
    planner: walletIdOnly,
    model: "Wallet",
    operation: "findMany",
    args: { take: 10 },
    expect: unsupported(/needs Wallet\.id to be a String shard key/),
  },
  {
    name: "an in list over two databases with distinct",
    planner: strict,
    model: "Wallet",
    operation: "findMany",
    args: { where: { id: { in: [W.g0m0, W.g1m1] } }, distinct: ["label"] },
    expect: unsupported(/distinct/),
  },
  {
    name: "findUnique with an in list over two databases",
    planner: strict,
    model: "Wallet",
    operation: "findUnique",
    args: { where: { id: { in: [W.g0m0, W.g1m1] } } },
    expect: unsupported(/Wallet\.findUnique cannot run across shards/),
  },
];

describe("Planner.plan", () => {
  describe("by id, every operation", () => it.each(byIdCases)("$name", (c) => void run(c)));
  describe("routing by keys", () => it.each(routingCases)("$name", (c) => void run(c)));
  describe("in lists", () => it.each(inCases)("$name", (c) => void run(c)));
  describe("createMany rows", () => it.each(createManyCases)("$name", (c) => void run(c)));
  describe("inside a transaction", () => it.each(withinCases)("$name", (c) => void run(c)));
  describe("refusals", () => it.each(refusalCases)("$name", (c) => void run(c)));
  describe("keyless", () => it.each(keylessCases)("$name", (c) => void run(c)));
  describe("one database", () => it.each(singleCases)("$name", (c) => void run(c)));
  describe("unsupported scatter shapes", () => it.each(unsupportedCases)("$name", (c) => void run(c)));

  it("a scatter plan's read asks each database for its own in list", () => {
    const args = {
      where: { id: { in: [W.g1m1, W.g0m0, W2.g1m1] } },
      orderBy: { balance: "asc" },
      skip: 1,
      take: 2,
    };
    const plan = strict.plan("Wallet", "findMany", args);
    if (plan.kind !== "shards" || !plan.read) throw new Error(`expected a merged read, got ${plan.kind}`);
    const { read } = plan;
    expect(placed(plan).targets.map((t) => read.argsFor(t))).toEqual([
      { where: { id: { in: [W.g0m0] } }, orderBy: [{ balance: "asc" }, { id: "asc" }], take: 3 },
      {
        where: { id: { in: [W.g1m1, W2.g1m1] } },
        orderBy: [{ balance: "asc" }, { id: "asc" }],
        take: 3,
      },
    ]);
    // The call's args are left as they were.
    expect(args.where.id.in).toEqual([W.g1m1, W.g0m0, W2.g1m1]);
  });

  it("a keyless scatter with a cursor reads the cursor row on the shard its ID names", () => {
    const plan = scattering.plan("Wallet", "findMany", { cursor: { id: W.g1m0 }, take: 2 });
    if (plan.kind !== "shards" || !plan.read) throw new Error(`expected a merged read, got ${plan.kind}`);
    expect(plan.read.prepare?.row?.shard).toBe(S.g1m0);
    expect(registry.databaseOf(plan.read.prepare!.row!.shard).index).toBe(1);
  });

  it("a keyless scatter is placed off the databases: its list of every shard is made only when asked", () => {
    const plan = scattering.plan("Wallet", "findMany", { take: 2 });
    if (plan.kind !== "shards") throw new Error(`expected a scatter, got ${plan.kind}`);
    expect(plan.spread.every).toBe(true);
    const { shape, targets } = place(plan, registry);
    expect(shape).toBe("scatter");
    expect(targets.map((t) => [t.database, t.shards.map((s) => s.key)])).toEqual([
      [0, ["0/0", "0/1"]],
      [1, ["0/2", "1/0"]],
      [2, ["1/1", "1/2"]],
    ]);
    // Asked, it is every shard, in shard order.
    expect(plan.spread.shards.map((s) => s.key)).toEqual(["0/0", "0/1", "0/2", "1/0", "1/1", "1/2"]);
  });

  it("never throws for bad input: refusals are plans", () => {
    for (const c of [...refusalCases, ...keylessCases, ...unsupportedCases, ...withinCases]) {
      expect(() => (c.planner ?? strict).plan(c.model, c.operation, c.args, c.context)).not.toThrow();
    }
  });

  it("maps every delegate to its model", () => {
    expect(strict.delegates.get("orderItem")).toBe("OrderItem");
    expect(strict.delegates.get("idempotencyKey")).toBe("IdempotencyKey");
    expect(strict.delegates.size).toBe(Object.keys(dataModel.models).length);
  });

  describe("keyless-where writes inside a transaction check their data against its shard", () => {
    for (const c of gapCases) it(c.name, () => void run(c));
    it("the same writes naming their shard in where are refused", () => {
      run({
        name: "keyed",
        model: "Wallet",
        operation: "updateMany",
        args: { where: { customerId: C.g0m0 }, data: { customerId: C.g1m1 } },
        context: { within: S.g0m0 },
        expect: crossShard(nested, S.g0m0, S.g1m1),
      });
    });
  });

  it("unknownShard 'default': an unregistered shard's ID goes to the default shard, logged", () => {
    const warnings: string[] = [];
    const lenient = createShardRegistry({
      shards: [
        { shard: S.g0m0, client: db0 },
        { shard: S.g1m1, client: db1 },
      ],
      defaultShard: S.g1m1,
      unknownShard: "default",
      logger: { warn: (m) => warnings.push(m) },
    });
    const p = new Planner(dataModel, lenient, { models });
    const plan = p.plan("Wallet", "findUnique", { where: { id: UNKNOWN } });
    expect(plan).toEqual({ kind: "shard", shard: S.g1m1 });
    expect(placed(plan, p).targets.map((t) => t.database)).toEqual([1]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/shard 0\/9 is not in the registry; routing to default shard 1\/1/);
  });

  it("Planner.read refuses operations that cannot run across shards", () => {
    expect(() => strict.read("Wallet", "findUnique", {})).toThrow(UnsupportedShardOperationError);
    expect(() => strict.read("Wallet", "upsert", {})).toThrow(/Wallet\.upsert cannot run across shards/);
  });
});

// ---- routing options --------------------------------------------------------------------------------

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(RoutingOptionsError);
    expect((error as RoutingOptionsError).code).toBe("INVALID_ROUTING_OPTIONS");
    const { issues, message } = error as RoutingOptionsError;
    for (const issue of issues) expect(message).toContain(issue);
    return issues;
  }
  throw new Error("expected RoutingOptionsError");
}

describe("routing options", () => {
  const make = (options: PlannerOptions) => () => new Planner(dataModel, registry, options);

  it("an unknown model in models", () => {
    expect(issuesOf(make({ models: { Nope: { keys: ["id"] } } }))).toEqual([
      "models.Nope: no such model in the Prisma schema",
    ]);
  });

  it("a key field that does not exist", () => {
    expect(issuesOf(make({ models: { Wallet: { keys: ["id", "ownerId"] } } }))).toEqual([
      "models.Wallet.keys: Wallet has no field ownerId",
    ]);
  });

  it("key fields that are not String scalars (Int, BigInt, a relation)", () => {
    expect(
      issuesOf(
        make({
          models: {
            Setting: { keys: ["id"] },
            Wallet: { keys: ["balance"] },
            Customer: { keys: ["wallets"] },
          },
        }),
      ),
    ).toEqual([
      "models.Customer.keys: Customer.wallets is not a String scalar (a ShardedUUID is stored as a string/uuid)",
      "models.Wallet.keys: Wallet.balance is not a String scalar (a ShardedUUID is stored as a string/uuid)",
      "models.Setting.keys: Setting.id is not a String scalar (a ShardedUUID is stored as a string/uuid)",
    ]);
  });

  it("lists every schema problem at once", () => {
    const issues = issuesOf(
      make({ models: { Nope: {}, Wallet: { keys: ["ownerId", "balance"] }, Order: { keys: ["total"] } } }),
    );
    expect([...issues].sort()).toEqual(
      [
        "models.Nope: no such model in the Prisma schema",
        "models.Wallet.keys: Wallet has no field ownerId",
        "models.Wallet.keys: Wallet.balance is not a String scalar (a ShardedUUID is stored as a string/uuid)",
        "models.Order.keys: Order.total is not a String scalar (a ShardedUUID is stored as a string/uuid)",
      ].sort(),
    );
  });

  it("bad keyless values, listed together by routingConfig and by the Planner", () => {
    const options = {
      keyless: "sometimes",
      models: {
        Wallet: { keys: ["id", "customerId"], keyless: { mode: "scatter", maxShards: 0 } },
        Order: { keyless: { mode: "all" } },
        OrderItem: { keyless: { mode: "scatter", retries: 3, policy: "best-effort" } },
        Customer: { keyless: 42 },
        Setting: { keyless: null },
      },
    } as unknown as PlannerOptions;
    const expected = [
      `keyless: expected 'refuse', 'scatter' or { mode: 'scatter', ... }, got "sometimes"`,
      "models.Order.keyless.mode: expected 'scatter'",
      "models.OrderItem.keyless.retries: unknown option",
      "models.OrderItem.keyless.policy: expected 'fail' or 'partial'",
      "models.Customer.keyless: expected 'refuse', 'scatter' or { mode: 'scatter', ... }, got 42",
      "models.Setting.keyless: expected 'refuse', 'scatter' or { mode: 'scatter', ... }, got null",
    ];
    // maxShards 0: the wording is zod's, the path is ours.
    const all = [...expected, expect.stringMatching(/^models\.Wallet\.keyless\.maxShards: .*1/)];
    for (const issues of [issuesOf(() => routingConfig(options)), issuesOf(make(options))]) {
      expect(issues).toHaveLength(all.length);
      expect(issues).toEqual(expect.arrayContaining(all));
    }
  });

  it("valid options pass, and a checked RoutingConfig is accepted as is", () => {
    const config = routingConfig({
      models: {
        ...models,
        Order: { keys: ["id", "customerId"], keyless: { mode: "scatter", maxShards: 3 } },
      },
      keyless: "refuse",
    });
    expect(config.keyless).toBeNull();
    expect(config.keylessPerModel.get("Order")).toEqual({ mode: "scatter", maxShards: 3 });
    const p = new Planner(dataModel, registry, config);
    expect(p.keys.keysOf("Order")).toEqual(["id", "customerId"]);
    expect(p.keys.keysOf("Customer")).toEqual(["id"]);
    expect(p.keys.keysOf("Setting")).toEqual([]);
    expect(placed(p.plan("Order", "count", {}), p).shape).toBe("scatter");
    expect(p.plan("Wallet", "count", {}).kind).toBe("refuse");
  });

  it("RoutingOptionsError is a ShardkitError", () => {
    try {
      routingConfig({ keyless: "x" as never });
    } catch (error) {
      expect(error).toBeInstanceOf(ShardkitError);
      return;
    }
    throw new Error("expected a throw");
  });
});
