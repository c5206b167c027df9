import { PrismaPg } from "@prisma/adapter-pg";
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import {
  createDatabase,
  dropDatabase,
  patient,
  pgUrl,
  waitForReplay,
  withClusterStopped,
  within,
} from "@shardkit/test-db";
import { thrownBy } from "@shardkit/vitest-config/errors";
import pg from "pg";
import { afterAll, beforeEach, describe, expect, inject, it, vi } from "vitest";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { models, S } from "../test/layout.js";
import { checkConnectionBudget } from "./budget.js";
import { shardRegistryFromConfig } from "./config.js";
import { RegistryConfigError } from "./errors.js";
import { Executor } from "./executor.js";
import { shardRouting } from "./extension.js";
import type { DatabaseStatus } from "./health.js";
import { openShards } from "./open/open.js";
import { Planner } from "./planner.js";
import type { DataModel } from "./prisma-private.js";
import { createShardRegistry } from "./registry.js";
import type { RolloutEvent } from "./schema/schema-rollout.js";

const issuesOf = (fn: () => unknown) => thrownBy(fn, RegistryConfigError).issues;

const fakeDb = (name: string) => ({ name, $disconnect: vi.fn(async () => {}) });

describe("replicas in the registry", () => {
  it("are given per database, as clients or { client, name?, pool? }; empty by default; disconnected with it", async () => {
    const [a, b, r1, r2] = ["a", "b", "r1", "r2"].map(fakeDb) as [
      ReturnType<typeof fakeDb>,
      ReturnType<typeof fakeDb>,
      ReturnType<typeof fakeDb>,
      ReturnType<typeof fakeDb>,
    ];
    const registry = createShardRegistry({
      shards: [
        { shard: "0/0", client: a },
        { shard: "1/0", client: b },
      ],
      databases: [{ client: a, name: "db-a", replicas: [r1, { client: r2, name: "db-a copy", pool: 3 }] }],
    });
    expect(registry.databases[0]!.replicas).toEqual([
      { client: r1, name: "db-a replica #0", pool: undefined },
      { client: r2, name: "db-a copy", pool: 3 },
    ]);
    expect(registry.databases[1]!.replicas).toEqual([]);
    await registry.disconnect();
    for (const client of [a, b, r1, r2]) expect(client.$disconnect).toHaveBeenCalledOnce();
  });

  it("refuses a replica that is a primary, one client twice, a non-client, a bad pool and replicas given twice", () => {
    const [a, b, r1, r2] = ["a", "b", "r1", "r2"].map(fakeDb) as ReturnType<typeof fakeDb>[];
    const shards = [
      { shard: "0/0", client: a! },
      { shard: "1/0", client: b! },
    ];
    expect(
      issuesOf(() => createShardRegistry({ shards, databases: [{ client: a!, replicas: [b!] }] })),
    ).toEqual([
      "databases[0].replicas[0]: this client is a database of the registry (a primary); a replica needs a client of its own",
    ]);
    expect(
      issuesOf(() =>
        createShardRegistry({
          shards,
          databases: [
            { client: a!, replicas: [r1!, r1!] },
            { client: b!, replicas: [{ client: r1! }] },
          ],
        }),
      ),
    ).toEqual([
      "databases[0].replicas[1]: the same replica client as databases[0].replicas[0]; a client is the replica of one database, once",
      "databases[1].replicas[0]: the same replica client as databases[0].replicas[0]; a client is the replica of one database, once",
    ]);
    expect(
      issuesOf(() =>
        createShardRegistry({
          shards,
          databases: [{ client: a!, replicas: [{} as never, { client: r2!, pool: 0 }] }],
        }),
      ),
    ).toEqual([
      "databases[0].replicas[0]: expected a PrismaClient (an object with $disconnect) or { client, name?, pool? }",
      "databases[0].replicas[1].pool: expected an integer >= 1, got 0",
    ]);
    expect(
      issuesOf(() =>
        createShardRegistry({
          shards,
          databases: [
            { client: a!, replicas: [r1!] },
            { client: a!, replicas: [r2!] },
            { client: b!, replicas: "r2" as never },
          ],
        }),
      ),
    ).toEqual([
      "databases[1].replicas: this database's replicas are already given in databases[0]; give them once",
      "databases[2].replicas: expected an array of clients",
    ]);
    // A spare database is a database too: it cannot be another's replica.
    expect(
      issuesOf(() =>
        createShardRegistry({ shards, databases: [{ client: r1! }, { client: a!, replicas: [r1!] }] }),
      ),
    ).toEqual([
      "databases[1].replicas[0]: this client is a database of the registry (a primary); a replica needs a client of its own",
    ]);
  });
});

describe("replicas in the JSON config", () => {
  const A = "postgres://app:secret@db-a:5432/app";
  const B = "postgres://db-b:5432/app";
  const RA1 = "postgres://app:secret@db-a-replica-1:5432/app";
  const RA2 = "postgres://db-a-replica-2:5432/app";
  const never = {
    createClient: () => {
      throw new Error("must not be called");
    },
  };

  it("creates each replica's client with replicaOf and its database's pool; a spare database may have replicas", () => {
    const made: { url: string; shards: string[]; database: { pool: number; replicaOf?: string } }[] = [];
    const registry = shardRegistryFromConfig(
      {
        shards: [
          { group: 0, member: 0, url: A, pool: 4, replicas: [RA1, RA2] },
          { group: 0, member: 1, url: A },
          { group: 1, member: 0, url: B },
        ],
        databases: [{ url: "postgres://spare:5432/app", replicas: ["postgres://spare-replica:5432/app"] }],
      },
      {
        createClient: (url, shards, database) => {
          made.push({ url, shards: shards.map((s) => s.key), database });
          return fakeDb(url);
        },
      },
    );
    expect(made).toEqual([
      { url: A, shards: ["0/0", "0/1"], database: { pool: 4 } },
      { url: RA1, shards: ["0/0", "0/1"], database: { pool: 4, replicaOf: A } },
      { url: RA2, shards: ["0/0", "0/1"], database: { pool: 4, replicaOf: A } },
      { url: B, shards: ["1/0"], database: { pool: 10 } },
      { url: "postgres://spare:5432/app", shards: [], database: { pool: 10 } },
      {
        url: "postgres://spare-replica:5432/app",
        shards: [],
        database: { pool: 10, replicaOf: "postgres://spare:5432/app" },
      },
    ]);
    expect(registry.databases.map((p) => p.replicas.map((r) => [r.name, r.pool]))).toEqual([
      [
        ["postgres://app:***@db-a-replica-1:5432/app", 4],
        ["postgres://db-a-replica-2:5432/app", 4],
      ],
      [],
      [["postgres://spare-replica:5432/app", 10]],
    ]);
  });

  it("refuses bad replica URLs, replicas that are databases or copy two, and entries of one URL that disagree; paths named", () => {
    expect(
      issuesOf(() =>
        shardRegistryFromConfig(
          {
            shards: [
              { group: 0, member: 0, url: A, replicas: ["nope", "mysql://x/y", RA1, RA1] },
              { group: 0, member: 1, url: A, replicas: [RA2] },
              { group: 1, member: 0, url: B, replicas: [A, RA1] },
            ],
          },
          never,
        ),
      ),
    ).toEqual([
      "shards[0].replicas[0]: not a URL: nope",
      "shards[0].replicas[1]: scheme mysql: is not one of postgres:, postgresql:",
      "shards[0].replicas[3]: listed twice",
      "shards[1].replicas: differ from the replicas given for the same database (shards[0]); entries with one URL share one database and its replicas",
      "shards[2].replicas[0]: postgres://app:***@db-a:5432/app is a database of the registry; a replica is a copy of one",
      "shards[2].replicas[1]: postgres://app:***@db-a-replica-1:5432/app is already a replica of postgres://app:***@db-a:5432/app; a replica copies one database",
    ]);
    expect(
      issuesOf(() =>
        shardRegistryFromConfig(
          {
            shards: [{ group: 0, member: 0, url: A, replicas: RA1 }],
            databases: [{ url: B, replicas: [""] }],
          },
          never,
        ),
      ),
    ).toEqual([
      expect.stringMatching(/^shards\[0\]\.replicas: /),
      expect.stringMatching(/^databases\[0\]\.replicas\[0\]: /),
    ]);
  });
});

// The executor with recording clients: which client each call ran on, with no database.
describe("the executor with replicas", () => {
  const model: DataModel = {
    models: {
      Customer: {
        fields: { id: { kind: "scalar", type: "String" }, name: { kind: "scalar", type: "String" } },
      },
    },
  };
  const [a, b, a1, a2] = ["a", "b", "a1", "a2"].map(fakeDb) as ReturnType<typeof fakeDb>[];
  const registry = createShardRegistry({
    shards: [
      { shard: "0/0", client: a! },
      { shard: "1/0", client: b! },
    ],
    databases: [{ client: a!, replicas: [a1!, a2!] }],
  });
  const view = { clients: [a!, b!], replicas: [[a1!, a2!], []] };
  const onA = () => ({ where: { id: ShardedId.generate("Customer", ShardIdentifier.of(0, 0)) } });

  function recording(failing: Map<object, unknown> = new Map()) {
    const calls: string[] = [];
    const executor = new Executor(
      new Planner(model, registry, { keyless: "scatter" }),
      async (client, _m, operation) => {
        calls.push(`${(client as { name: string }).name}:${operation}`);
        if (failing.has(client)) throw failing.get(client);
        return operation === "count" ? 1 : { on: (client as { name: string }).name };
      },
    );
    return { calls, executor };
  }

  it("reads go to the replicas in turn; writes, other databases and views without replicas do not", async () => {
    const { calls, executor } = recording();
    for (let i = 0; i < 3; i++) await executor.run(view, "Customer", "findUnique", onA());
    await executor.run(view, "Customer", "update", { ...onA(), data: { name: "x" } });
    await executor.run(view, "Customer", "findMany", { where: { id: { in: [onA().where.id] } } });
    await executor.run(view, "Customer", "findUnique", {
      where: { id: ShardedId.generate("Customer", ShardIdentifier.of(1, 0)) },
    });
    await executor.run({ clients: view.clients }, "Customer", "findFirst", onA()); // $primary()
    expect(calls).toEqual([
      "a1:findUnique",
      "a2:findUnique",
      "a1:findUnique",
      "a:update",
      "a2:findMany",
      "b:findUnique",
      "a:findFirst",
    ]);
  });

  it("each database's leg of a scatter reads its replicas", async () => {
    const { calls, executor } = recording();
    expect(await executor.run(view, "Customer", "count", {})).toBe(2);
    expect(await executor.run(view, "Customer", "count", {})).toBe(2);
    expect(calls.sort()).toEqual(["a1:count", "a2:count", "b:count", "b:count"]);
  });

  it("inside an action's staging or a shard transaction, reads stay on the database", async () => {
    const { calls, executor } = recording();
    await executor.scope.run({ kind: "staging" }, () => executor.run(view, "Customer", "findUnique", onA()));
    await executor.scope.run({ kind: "tx", shard: S.g0m0, tx: a!, guarded: a! }, () =>
      executor.run(view, "Customer", "findUnique", onA()),
    );
    expect(calls).toEqual(["a:findUnique", "a:findUnique"]);
  });

  it("a replica that is unavailable is asked once more of the database; any other error is the answer", async () => {
    const down = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5442"), { code: "ECONNREFUSED" });
    const { calls, executor } = recording(new Map([[a1!, down]]));
    expect(await executor.run(view, "Customer", "findUnique", onA())).toEqual({ on: "a" });
    expect(await executor.run(view, "Customer", "findUnique", onA())).toEqual({ on: "a2" });
    expect(calls).toEqual(["a1:findUnique", "a:findUnique", "a2:findUnique"]);

    const refused = Object.assign(new Error("invalid input"), { code: "P2009" });
    const other = recording(new Map([[a1!, refused]]));
    await expect(other.executor.run(view, "Customer", "findUnique", onA())).rejects.toBe(refused);
    expect(other.calls).toEqual(["a1:findUnique"]);
  });

  it("a read on a replica starts only when awaited", async () => {
    const { calls, executor } = recording();
    const pending = executor.run(view, "Customer", "findUnique", onA());
    await Promise.resolve();
    expect(calls).toEqual([]);
    await pending;
    expect(calls).toEqual(["a1:findUnique"]);
  });
});

// ---------------------------------------------------------------------------------------------
// On a real primary with two streaming replicas (test/replica-setup.ts)
// ---------------------------------------------------------------------------------------------

type On = "primary" | "r1" | "r2" | "b";
const urls = inject("replicaUrls");
const shardUrls = inject("shardUrls");
const { primary: PRIMARY, replicas: REPLICAS } = inject("replication");
const log: { on: On; sql: string }[] = [];

/** A PrismaClient that records each statement it sends, named by where it runs. */
function logged(on: On, url: string, adapter?: SqlMigrationAwareDriverAdapterFactory) {
  const client = new PrismaClient({
    adapter: adapter ?? new PrismaPg({ connectionString: url }),
    log: [{ emit: "event", level: "query" }],
  });
  client.$on("query", (event) => log.push({ on, sql: event.query }));
  return client;
}

/** Where each statement on `table` ran since the last clear, in order. */
const landed = (table = "Customer") => log.filter((e) => e.sql.includes(`"${table}"`)).map((e) => e.on);
const writes = () => log.filter((e) => /^\s*(INSERT|UPDATE|DELETE)/i.test(e.sql)).map((e) => e.on);
/** Both replicas have replayed everything the primary had written when called. */
const replayed = () => Promise.all(REPLICAS.map((r) => waitForReplay(r.port, PRIMARY.port)));

async function onServer<T>(port: number, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: pgUrl(port, "postgres") });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

/** Runs `fn` while both replicas have replay paused: they keep receiving WAL but apply none of it. */
async function withReplayPaused(fn: () => Promise<void>): Promise<void> {
  for (const r of REPLICAS) await onServer(r.port, "SELECT pg_wal_replay_pause()");
  try {
    for (const r of REPLICAS) {
      const deadline = Date.now() + 10_000;
      while (
        (await onServer<{ s: string }>(r.port, "SELECT pg_get_wal_replay_pause_state() AS s"))[0]!.s !==
        "paused"
      ) {
        if (Date.now() > deadline) throw new Error(`replay on ${r.cluster} did not pause`);
      }
    }
    await fn();
  } finally {
    for (const r of REPLICAS) await onServer(r.port, "SELECT pg_wal_replay_resume()");
  }
}

describe("read replicas on PostgreSQL streaming replication", () => {
  const primary = logged("primary", urls.primary);
  const r1 = logged("r1", urls.replicas[0]!);
  const r2 = logged("r2", urls.replicas[1]!);
  const b = logged("b", shardUrls.b);
  // 0/0 on the primary (two replicas); 1/0 on database b of the other test servers (none).
  const registry = createShardRegistry({
    shards: [
      { shard: S.g0m0, client: primary },
      { shard: S.g1m0, client: b },
    ],
    databases: [{ client: primary, replicas: [r1, r2] }],
  });
  // A routed client per test: each starts its round robin at the first replica.
  const route = () => primary.$extends(shardRouting({ registry, models, keyless: "scatter" }));
  let db = route();
  const customer = async (shard = S.g0m0, name = "c") => {
    const id = ShardedId.generate("Customer", shard);
    await db.customer.create({ data: { id, name, region: "eu" } });
    return id;
  };

  afterAll(() => registry.disconnect());
  beforeEach(async () => {
    for (const client of [primary, b]) await client.$executeRawUnsafe('TRUNCATE "Customer" CASCADE');
    await replayed();
    log.length = 0;
    db = route();
  });

  it("the replicas are standbys streaming from the primary", async () => {
    const recovery = async (client: PrismaClient) =>
      (await client.$queryRawUnsafe<{ r: boolean }[]>("SELECT pg_is_in_recovery() AS r"))[0]!.r;
    expect([await recovery(primary), await recovery(r1), await recovery(r2)]).toEqual([false, true, true]);
    const senders = await onServer<{ application_name: string; state: string }>(
      PRIMARY.port,
      "SELECT application_name, state FROM pg_stat_replication ORDER BY application_name",
    );
    expect(senders.filter((s) => s.state === "streaming").map((s) => s.application_name)).toEqual(
      expect.arrayContaining(REPLICAS.map((r) => `15/${r.cluster}`)),
    );
  });

  it("writes land on the primary; reads on the replicas, in turn", async () => {
    const id = await customer();
    expect(landed()).toEqual(["primary"]);
    await replayed();
    log.length = 0;
    for (let i = 0; i < 4; i++) expect((await db.customer.findUnique({ where: { id } }))?.id).toBe(id);
    expect(await db.customer.count({ where: { id } })).toBe(1);
    expect((await db.customer.findFirstOrThrow({ where: { id } })).id).toBe(id);
    expect(landed()).toEqual(["r1", "r2", "r1", "r2", "r1", "r2"]);
    await db.customer.update({ where: { id }, data: { name: "renamed" } });
    await db.customer.delete({ where: { id } });
    expect(writes()).toEqual(["primary", "primary"]);
  });

  it("a replica lags: a read right after a write may miss it; $primary() reads your writes", async () => {
    await withReplayPaused(async () => {
      const id = await customer(S.g0m0, "fresh");
      log.length = 0;
      // Both replicas received the write but have not applied it: what they answer is what a lagging replica does.
      expect(await db.customer.findUnique({ where: { id } })).toBeNull();
      expect(await db.customer.findUnique({ where: { id } })).toBeNull();
      expect((await db.$primary().customer.findUnique({ where: { id } }))?.name).toBe("fresh");
      expect(await db.$primary().customer.count({ where: { id } })).toBe(1);
      expect(landed()).toEqual(["r1", "r2", "primary", "primary"]);
    });
    await replayed();
    expect(await db.customer.count()).toBe(1);
  });

  it("shard transactions, actions (reads included), raw SQL and $shard stay on the primary", async () => {
    const id = await customer();
    await replayed();
    log.length = 0;
    await db.$transactionOn(id, async (tx) => {
      await tx.customer.findUnique({ where: { id } });
      await tx.customer.update({ where: { id }, data: { name: "in tx" } });
      // The routed client inside the transaction runs in it, so on the primary too.
      await db.customer.findUnique({ where: { id } });
    });
    await db.$action(async (unit) => {
      const found = await db.customer.findUnique({ where: { id } }); // decides the action: read on the primary
      unit.update("customer", { where: { id }, data: { name: `${found?.name} then action` } });
    });
    expect(landed().every((on) => on === "primary")).toBe(true);
    const rows = await db.$shard(id).$queryRawUnsafe<{ r: boolean }[]>("SELECT pg_is_in_recovery() AS r");
    expect(rows[0]!.r).toBe(false);
    expect((await db.$primary().customer.findUnique({ where: { id } }))?.name).toBe("in tx then action");
  });

  it("each database's leg of a scatter reads its replicas; a database without replicas reads itself", async () => {
    await customer(S.g0m0);
    await customer(S.g1m0);
    await replayed();
    log.length = 0;
    expect(await db.customer.count()).toBe(2);
    expect((await db.customer.findMany({ orderBy: { id: "asc" } })).length).toBe(2);
    expect(landed().sort()).toEqual(["b", "b", "r1", "r2"]);
    log.length = 0;
    expect(await db.$primary().customer.count()).toBe(2);
    expect(landed().sort()).toEqual(["b", "primary"]);
  });

  it("extensions added after routing apply on the replicas' clients too", async () => {
    const id = await customer();
    await replayed();
    log.length = 0;
    const seen: string[] = [];
    const audited = db.$extends({
      query: {
        $allModels: {
          async $allOperations({ operation, args, query }) {
            seen.push(operation);
            return query(args);
          },
        },
      },
    });
    await audited.customer.findUnique({ where: { id } });
    await audited.customer.findUnique({ where: { id } });
    await audited.$primary().customer.findUnique({ where: { id } });
    expect(landed()).toEqual(["r1", "r2", "primary"]);
    expect(seen).toEqual(["findUnique", "findUnique", "findUnique"]);
  });

  it(
    "a replica that is down: reads answer from the primary instead, writes still land on the primary only",
    async () => {
      const id = await customer();
      await replayed();
      await db.customer.findUnique({ where: { id } }); // r1 has a pooled connection when it goes down
      log.length = 0;
      await withClusterStopped(REPLICAS[0]!.cluster, REPLICAS[0]!.port, async () => {
        for (let i = 0; i < 4; i++) expect((await db.customer.findUnique({ where: { id } }))?.id).toBe(id);
        expect(await db.customer.count({ where: { id } })).toBe(1);
        expect(landed()).toEqual(["r2", "primary", "r2", "primary", "r2"]);
        const created = await customer(S.g0m0, "while r1 was down");
        expect(writes()).toEqual(["primary"]);
        expect((await db.$primary().customer.findUnique({ where: { id: created } }))?.name).toBe(
          "while r1 was down",
        );
      });
      // Back up: it catches up from the primary and serves reads again.
      await replayed();
      log.length = 0;
      await db.customer.count({ where: { id } });
      await db.customer.count({ where: { id } });
      expect(landed().sort()).toEqual(["r1", "r2"]);
      expect(await r1.customer.count()).toBe(2);
    },
    patient(60_000),
  );

  it("from the JSON config: shardRegistryFromConfig creates the replicas' clients and reads go to them", async () => {
    const made: string[] = [];
    const fromConfig = shardRegistryFromConfig(
      {
        shards: [
          { group: 0, member: 0, url: urls.primary, pool: 2, replicas: urls.replicas },
          { group: 1, member: 0, url: shardUrls.b, pool: 2 },
        ],
      },
      {
        createClient: (url, _shards, { pool, replicaOf }) => {
          const on: On =
            url === urls.primary
              ? "primary"
              : url === shardUrls.b
                ? "b"
                : url === urls.replicas[0]
                  ? "r1"
                  : "r2";
          made.push(
            replicaOf === undefined ? on : `${on} of ${replicaOf === urls.primary ? "primary" : replicaOf}`,
          );
          return logged(on, url, new PrismaPg({ connectionString: url, max: pool }));
        },
      },
    );
    try {
      expect(made).toEqual(["primary", "r1 of primary", "r2 of primary", "b"]);
      const routed = fromConfig.databases[0]!.client.$extends(shardRouting({ registry: fromConfig, models }));
      const id = ShardedId.generate("Customer", S.g0m0);
      await routed.customer.create({ data: { id, name: "from config", region: "eu" } });
      await replayed();
      log.length = 0;
      expect((await routed.customer.findUnique({ where: { id } }))?.name).toBe("from config");
      expect((await routed.customer.findUnique({ where: { id } }))?.name).toBe("from config");
      expect(landed()).toEqual(["r1", "r2"]);
      const budget = await checkConnectionBudget(fromConfig);
      // Four servers: the primary's, b's (the machine's), and each replica's own.
      expect(budget.servers.map((s) => s.databases.map((d) => d.pool))).toEqual([[2], [2], [2], [2]]);
    } finally {
      await fromConfig.disconnect();
    }
  });
});

describe("openShards with replicas", () => {
  const schema = new URL("../test/schema.prisma", import.meta.url).pathname;
  const name = `sk_open_replica_${process.pid}`;
  afterAll(() => dropDatabase(PRIMARY.port, name));

  it(
    "rolls the schema out to the database only; the replica opens once it has replayed it; reads go there",
    async () => {
      const url = await createDatabase(PRIMARY.port, name);
      const replicaUrl = pgUrl(REPLICAS[0]!.port, name);
      const made: { name: string; replicaOf?: string }[] = [];
      const events: RolloutEvent[] = [];
      const states: DatabaseStatus[] = [];
      const open = await openShards({
        schema,
        shardsJson: JSON.stringify({
          shards: [{ group: 0, member: 0, url, pool: 3, replicas: [replicaUrl] }],
        }),
        createClient: (adapter, database) => {
          made.push(database);
          return logged(database.replicaOf ? "r1" : "primary", "", adapter);
        },
        onProgress: (e) => events.push(e),
        onState: (s) => states.push(s),
        retry: { baseMs: 20, maxMs: 200 },
      });
      try {
        await within(open.ready, 20_000, "the open becoming ready");
        expect(made).toEqual([{ name: url }, { name: replicaUrl, replicaOf: url }]);
        expect(events.filter((e) => e.type === "done").map((e) => e.target)).toEqual([url]);
        expect(open.databases()).toMatchObject([
          { name: url, state: "ready" },
          { name: replicaUrl, replicaOf: url, shards: ["0/0"], state: "ready" },
        ]);
        expect(states.at(-1)).toMatchObject({ name: replicaUrl, state: "ready" });
        const routed = open.registry.databases[0]!.client.$extends(shardRouting({ registry: open.registry }));
        const id = ShardedId.generate("Customer", S.g0m0);
        await routed.customer.create({ data: { id, name: "opened", region: "eu" } });
        await waitForReplay(REPLICAS[0]!.port, PRIMARY.port);
        log.length = 0;
        expect((await routed.customer.findUnique({ where: { id } }))?.name).toBe("opened");
        expect(landed()).toEqual(["r1"]);
      } finally {
        await open.close();
      }
    },
    patient(60_000),
  );

  it("refuses a replica that is not a standby, or a standby of another database, and a standby listed as a database", async () => {
    const createClient = (adapter: SqlMigrationAwareDriverAdapterFactory) => new PrismaClient({ adapter });
    const attempt = (shards: unknown) =>
      openShards({
        schema,
        createClient,
        shardsJson: JSON.stringify({ shards }),
        onProgress: () => {},
      }).catch((e: unknown) => e);
    const notStandby = await attempt([{ group: 0, member: 0, url: urls.primary, replicas: [shardUrls.a] }]);
    expect(notStandby).toBeInstanceOf(RegistryConfigError);
    expect(String(notStandby)).toMatch(/is listed as a replica of .* but is not a standby/);
    const otherDatabase = await attempt([
      { group: 0, member: 0, url: urls.primary, replicas: [pgUrl(REPLICAS[0]!.port, "postgres")] },
    ]);
    expect(String(otherDatabase)).toMatch(
      /is not a streaming replica of .*: it is database postgres of system/,
    );
    const standby = await attempt([{ group: 0, member: 0, url: urls.replicas[0] }]);
    expect(String(standby)).toMatch(/is a standby \(pg_is_in_recovery\(\) is true\)/);
  });
});
