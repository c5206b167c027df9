import { type AddressInfo, createServer, type Socket } from "node:net";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { patient } from "@shardkit/test-db";
import { describeErrorRules, type ErrorTable } from "@shardkit/vitest-config/errors";
import pg from "pg";
import { afterAll, inject } from "vitest";
import { atomicDatabases, atomicRouter, eachDatabase } from "../test/atomic-world.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { walletOf } from "../test/layout.js";
import { makeWorld, S } from "../test/world.js";
import { checkConnectionBudget } from "./budget.js";
import { shardRegistryFromConfig } from "./config.js";
import { withShardDeadline } from "./deadline.js";
import * as errors from "./errors.js";
import { shardRouting } from "./extension.js";
import { idempotent } from "./idempotency.js";
import { emitEvent } from "./outbox.js";
import { createShardRegistry } from "./registry.js";
import { createOutboxRelay } from "./relay/relay.js";
import { rolloutSchema } from "./rollout.js";
import { ROLLOUT_LOCK_KEY, withRolloutLock } from "./schema/rollout-lock.js";
import { byDirectory } from "./strategies.js";

// Every code of @shardkit/prisma, raised through the public API (real PostgreSQL where it takes one).
const world = makeWorld();
const { db } = world;
afterAll(() => world.close());

const customer = (shard: ShardIdentifier) => ({
  id: ShardedId.generate("Customer", shard),
  name: "c",
  region: "x",
});

const byCode: ErrorTable<errors.PrismaShardErrorCode> = {
  INVALID_CONFIG: [errors.RegistryConfigError, () => createShardRegistry({ shards: [] })],
  INVALID_ROUTING_OPTIONS: [
    errors.RoutingOptionsError,
    () => shardRouting({ registry: world.registry, keyless: "x" as never }),
  ],
  UNKNOWN_SHARD: [
    errors.UnknownShardError,
    () => db.customer.findUnique({ where: { id: customer(ShardIdentifier.of(9, 9)).id } }),
  ],
  SHARD_KEY_REQUIRED: [errors.ShardKeyRequiredError, () => db.customer.findMany()],
  CROSS_SHARD: [
    errors.CrossShardError,
    () =>
      db.wallet.create({
        data: { id: ShardedId.generate("Wallet", S.g0m0), customerId: customer(S.g1m1).id },
      }),
  ],
  PARTIAL_COMMIT: [
    errors.PartialCommitError,
    () =>
      db.$action(
        (unit) => {
          unit.create("customer", { data: customer(S.g0m0) });
          const owner = customer(S.g1m1).id; // never created: the wallet's foreign key fails
          unit.create("wallet", walletOf(owner));
        },
        { allowCrossShard: true },
      ),
  ],
  NOT_COMMITTED: [
    errors.NotCommittedError,
    async () => {
      const owner = customer(S.g0m2).id;
      let staged: { result: unknown } | undefined;
      await db
        .$action((unit) => {
          staged = unit.create("wallet", walletOf(owner));
        })
        .catch(() => {});
      return staged?.result;
    },
  ],
  UNSUPPORTED: [errors.UnsupportedShardOperationError, () => db.$transaction(async () => {})],
  SCATTER_REFUSED: [errors.ScatterRefusedError, () => db.$scatter({ maxShards: 1 }).customer.findMany()],
  COMMAND_UNAVAILABLE: [
    errors.CommandUnavailableError,
    () =>
      db.$command(
        S.g0m1,
        { kind: "k", key: `k-${ShardedId.generate("Customer", S.g0m1)}`, request: {}, timeoutMs: 20 },
        (tx) => tx.$executeRawUnsafe("SELECT pg_sleep(0.5)"),
      ),
  ],
  IDEMPOTENCY_CONFLICT: [
    errors.IdempotencyConflictError,
    () =>
      db.$transactionOn(S.g0m1, async (tx) => {
        const key = `k-${ShardedId.generate("Customer", S.g0m1)}`;
        await idempotent(tx, { shard: S.g0m1, kind: "k", key }, { a: 1 }, async () => 1);
        await idempotent(tx, { shard: S.g0m1, kind: "k", key }, { a: 2 }, async () => 2);
      }),
  ],
  INVALID_EVENT: [
    errors.InvalidEventError,
    () => emitEvent({}, S.g0m0, { topic: "", aggregateId: "x", payload: null }),
  ],
  MISSING_MODEL: [
    errors.MissingModelError,
    () => emitEvent({}, S.g0m0, { topic: "t", aggregateId: customer(S.g0m0).id, payload: null }),
  ],
  CONNECTION_BUDGET: [
    errors.ConnectionBudgetError,
    async () => {
      const urls = inject("shardUrls");
      const registry = shardRegistryFromConfig(
        [
          { group: 0, member: 0, url: urls.a, pool: 60 },
          { group: 0, member: 1, url: urls.b, pool: 60 },
        ],
        {
          createClient: (url, _s, { pool }) =>
            new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: pool }) }),
        },
      );
      try {
        await checkConnectionBudget(registry);
      } finally {
        await registry.disconnect();
      }
    },
  ],
  ROLLOUT_FAILED: [
    errors.SchemaRolloutError,
    () =>
      rolloutSchema({
        schema: new URL("../test/schema.prisma", import.meta.url).pathname,
        targets: [
          {
            name: "nowhere",
            adapter: new PrismaPg({ connectionString: "postgresql://postgres@127.0.0.1:1/x" }),
          },
        ],
        onProgress: () => {},
      }),
  ],
  INVALID_ROLLOUT_OPTIONS: [
    errors.RolloutOptionsError,
    () => rolloutSchema({ schema: "/no/such/schema.prisma", targets: [], onProgress: () => {} }),
  ],
  ROLLOUT_LOCK_TIMEOUT: [
    errors.RolloutLockTimeoutError,
    async () => {
      // Another rollout (a connection of its own) holds the database's rollout lock.
      const holder = new pg.Client({ connectionString: inject("shardUrls").a });
      await holder.connect();
      try {
        await holder.query(`BEGIN; SELECT pg_advisory_xact_lock(${ROLLOUT_LOCK_KEY})`);
        return await withRolloutLock(
          new PrismaPg({ connectionString: inject("shardUrls").a }),
          async () => {},
          50,
        );
      } finally {
        await holder.end();
      }
    },
  ],
  SHARD_TIMEOUT: [errors.ShardTimeoutError, () => withShardDeadline(S.g0m0, 20, () => new Promise(() => {}))],
  DATABASE_TIMEOUT: [
    errors.DatabaseTimeoutError,
    async () => {
      // A server that accepts connections and never answers: the relay's claim cannot finish.
      const sockets: Socket[] = [];
      const silent = createServer((socket) => void sockets.push(socket));
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      const { port } = silent.address() as AddressInfo;
      const client = new PrismaClient({
        adapter: new PrismaPg({ connectionString: `postgresql://postgres@127.0.0.1:${port}/x` }),
      });
      const relay = createOutboxRelay({
        registry: createShardRegistry({ shards: [{ shard: S.g0m0, client }] }),
        queryTimeoutMs: 50,
        deliver: async () => {},
      });
      try {
        const report = await relay.runOnce();
        throw report.missing[0]?.error;
      } finally {
        silent.close();
        for (const socket of sockets) socket.destroy();
        await client.$disconnect().catch(() => {});
      }
    },
  ],
  DATABASE_UNAVAILABLE: [
    errors.DatabaseUnavailableError,
    async () => {
      // An atomic action over two databases, the second one's server down: nothing listens on port 1.
      await atomicWorld();
      const down = atomicRouter(
        [atomic!.urls[0]!, "postgresql://postgres@127.0.0.1:1/down"],
        [[S.g0m0.key], [S.g0m2.key]],
      );
      try {
        return await down.db.$action(
          (unit) => {
            unit.create("customer", { data: customer(S.g0m0) });
            unit.create("customer", { data: customer(S.g0m2) });
          },
          { atomic: true },
        );
      } finally {
        await down.close();
      }
    },
  ],
  DIRECTORY_UNAVAILABLE: [
    errors.DirectoryUnavailableError,
    () =>
      routedBy(
        // A directory service that is down: nothing listens on port 1.
        byDirectory("name", { lookup: async () => (await fetch("http://127.0.0.1:1/")).text() }),
      ).setting.findFirst({ where: { name: "x" } }),
  ],
  NOT_IN_DIRECTORY: [
    errors.NotInDirectoryError,
    () => routedBy(byDirectory("name", { lookup: () => null })).setting.findFirst({ where: { name: "x" } }),
  ],
  UNIQUE_VIOLATION: [
    errors.UniqueViolationError,
    async () => {
      await world.truncate();
      const unique = world.clients.a.$extends(
        shardRouting({ registry: world.registry, models: { Customer: { unique: { email: true } } } }),
      );
      await unique.customer.create({ data: { ...customer(S.g0m0), email: "taken@x.com" } });
      return unique.customer.create({ data: { ...customer(S.g1m1), email: "TAKEN@x.com" } });
    },
  ],
  ATOMIC_UNAVAILABLE: [
    errors.AtomicUnavailableError,
    // The tests' servers keep PostgreSQL's default max_prepared_transactions = 0.
    () =>
      db.$action(
        (unit) => {
          unit.create("customer", { data: customer(S.g0m0) });
          unit.create("customer", { data: customer(S.g1m1) });
        },
        { atomic: true },
      ),
  ],
  ATOMIC_ABORTED: [
    errors.AtomicAbortedError,
    // A coordinator slower than the lease: another router concludes its action first.
    () =>
      atomicOverTwo(async () => {
        const other = atomicRouter(atomic!.urls);
        await other.db.$recoverAtomic({ leaseMs: 0 }).finally(() => other.close());
      }),
  ],
  ATOMIC_IN_DOUBT: [
    errors.AtomicInDoubtError,
    async () => {
      // The deciding database takes no connection from the moment every database prepared.
      await atomicWorld();
      const name = new URL(atomic!.urls[0]!).pathname.slice(1);
      const admin = (sql: string) => eachDatabase([atomic!.urls[2]!], sql);
      try {
        return await atomicOverTwo(async () => {
          await admin(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
          await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}'`);
        });
      } finally {
        await admin(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
        await atomicRouted!.db.$recoverAtomic({ leaseMs: 0 });
      }
    },
  ],
};

/** An atomic action over two databases of the atomic tests' server; `whenPrepared` runs once both prepared. */
async function atomicOverTwo(whenPrepared: () => Promise<void>) {
  const router = await atomicWorld();
  let prepared = 0;
  return router.db.$action(
    (unit) => {
      unit.create("customer", { data: customer(S.g0m0) });
      unit.create("customer", { data: customer(S.g1m1) });
    },
    {
      atomic: true,
      atomicProbe: async (point) => {
        if (point === "prepared" && ++prepared === 2) await whenPrepared();
      },
    },
  );
}

/** The atomic tests' server and databases (max_prepared_transactions > 0), made on first use. */
let atomic: Awaited<ReturnType<typeof atomicDatabases>> | undefined;
let atomicRouted: ReturnType<typeof atomicRouter> | undefined;
async function atomicWorld() {
  atomic ??= await atomicDatabases("errors");
  atomicRouted ??= atomicRouter(atomic.urls);
  return atomicRouted;
}
afterAll(async () => {
  await atomicRouted?.close();
  await atomic?.release();
}, patient(120_000));

/** A routed client whose Setting model is routed by `key`. */
function routedBy(key: ReturnType<typeof byDirectory>) {
  return world.clients.a.$extends(
    shardRouting({ registry: world.registry, models: { Setting: { keys: [key] } } }),
  );
}

describeErrorRules(errors, byCode, import.meta.url);
