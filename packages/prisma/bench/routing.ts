// pnpm bench (in packages/prisma): what the routing extension costs, each figure a ratio against a
// baseline measured in the same run. Latency: calls alternate between the variants (ABC, BCA,
// CAB, ...) so a noisy disk or CPU hits every variant alike; medians are reported. Throughput: 64
// concurrent callers, runs alternating between the variants; the median run is reported.
//
//   1. a shard on database A (the extension is installed on A's client) vs A's own client
//   2. a shard on database B (the extension is still installed on A's client) vs B's own client
//   3. in both: an empty pass-through query extension, Prisma's own cost of having one
//   4. `in` lists over two databases vs the same size of list on one database
//   5. 64 concurrent findUnique callers: calls/s, and whether Prisma still batches them
//
// BENCH_ROUNDS (default 2000): calls per variant and operation in 1, 2 and 4.
// BENCH_ERROR_FORMAT (default "minimal", what Prisma uses under NODE_ENV=production): with
// "colorless" or "pretty" (its development default) Prisma captures every call's call site with
// `new Error()`, whose cost grows with the depth of the stack, so any wrapper pays more there.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedId, ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { MAIN_PORT } from "@shardkit/test-db";
import pg from "pg";
import { createShardRegistry, shardRouting } from "../src/index.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { type BenchDatabase, median, onBenchDatabases, measure as timed, type Variant } from "./measure.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2000);
const ERROR_FORMAT = (process.env.BENCH_ERROR_FORMAT ?? "minimal") as "minimal" | "colorless" | "pretty";
const WARMUP = 1000; // calls per variant before timing: a running service is warm
const CALLERS = 64;
const ITERATIONS = 100; // findUniques per caller in one throughput run
const THROUGHPUT_RUNS = 15; // per variant, alternating
const COUNT_ITERATIONS = 5; // per caller in the statement-counting pass

// ---------------------------------------------------------------------------------------------
// Databases, clients, rows
// ---------------------------------------------------------------------------------------------

await onBenchDatabases(["a", "b"], bench, { asyncCommit: true });

/** Everything but the databases' creation, set-up and drop. */
async function bench(databases: BenchDatabase[]): Promise<void> {
  const urls = databases.map((db) => db.url);
  const [urlA, urlB] = urls as [string, string];
  const { clients } = databases[0]!;

  const track = <C extends PrismaClient>(client: C): C => {
    clients.push(client);
    return client;
  };
  const plain = (url: string) =>
    track(new PrismaClient({ adapter: new PrismaPg({ connectionString: url }), errorFormat: ERROR_FORMAT }));
  const a = plain(urlA);
  const b = plain(urlB);
  // Used only in the statement-counting pass (a query listener is not free), never while timing.
  const countA = track(
    new PrismaClient({
      adapter: new PrismaPg({ connectionString: urlA }),
      errorFormat: ERROR_FORMAT,
      log: [{ emit: "event", level: "query" }],
    }),
  );
  const countB = track(
    new PrismaClient({
      adapter: new PrismaPg({ connectionString: urlB }),
      errorFormat: ERROR_FORMAT,
      log: [{ emit: "event", level: "query" }],
    }),
  );
  const statements = [0, 0];
  countA.$on("query", () => statements[0]!++);
  countB.$on("query", () => statements[1]!++);

  const shard = (group: number, member: number) => ShardIdentifier.of(group, member);
  const fourShards = <C extends PrismaClient>(onA: C, onB: C) =>
    createShardRegistry({
      shards: [
        { shard: shard(0, 0), client: onA },
        { shard: shard(0, 1), client: onA },
        { shard: shard(1, 0), client: onB },
        { shard: shard(1, 1), client: onB },
      ],
    });
  const four = fourShards(a, b);
  // Pre-split: ten logical shards, five per database.
  const preSplit = createShardRegistry({
    shards: [0, 1, 2, 3, 4].flatMap((m) => [
      { shard: shard(0, m), client: a },
      { shard: shard(1, m), client: b },
    ]),
  });
  const routed = a.$extends(shardRouting({ registry: four }));
  const routedPreSplit = a.$extends(shardRouting({ registry: preSplit }));
  const countRouted = countA.$extends(shardRouting({ registry: fourShards(countA, countB) }));
  const countPreSplit = countA.$extends(
    shardRouting({
      registry: createShardRegistry({
        shards: [0, 1, 2, 3, 4].flatMap((m) => [
          { shard: shard(0, m), client: countA },
          { shard: shard(1, m), client: countB },
        ]),
      }),
    }),
  );
  /** Statements `run` sends to A and to B (through the counting clients). */
  async function statementsOf(run: () => PromiseLike<unknown>): Promise<[number, number]> {
    statements[0] = 0;
    statements[1] = 0;
    await run();
    return [statements[0]!, statements[1]!];
  }
  const passThrough = (client: PrismaClient) =>
    client.$extends({ query: { $allModels: { $allOperations: ({ args, query }) => query(args) } } });
  const passA = passThrough(a);
  const passB = passThrough(b);

  /** `n` customers on `on`'s shard `s`, inserted through that database's client. */
  async function seed(client: PrismaClient, s: ShardIdentifier, n: number): Promise<string[]> {
    const ids = Array.from({ length: n }, () => ShardedId.generate("Customer", s) as string);
    await client.customer.createMany({ data: ids.map((id, i) => ({ id, name: `c${i}`, region: "eu" })) });
    return ids;
  }
  const pool = new Map<string, string[]>();
  for (const m of [0, 1, 2, 3, 4]) {
    pool.set(`0/${m}`, await seed(a, shard(0, m), m < 2 ? 500 : 100));
    pool.set(`1/${m}`, await seed(b, shard(1, m), m < 2 ? 500 : 100));
  }
  // Statistics now, so that PostgreSQL plans `id IN (...)` with the primary key index from the first call.
  for (const url of urls) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query("ANALYZE");
    await admin.end();
  }
  const idsOf = (key: string) => pool.get(key)!;
  const SHARD_A = shard(0, 1); // on A, the database whose client the extension is installed on
  const SHARD_B = shard(1, 1); // on B

  /** `count` lists of ids: list k takes `take[j]` ids from shard `keys[j]`'s pool. */
  function lists(count: number, keys: string[], take: number[]): string[][] {
    return Array.from({ length: count }, (_, k) =>
      keys.flatMap((key, j) => {
        const ids = idsOf(key);
        return Array.from({ length: take[j]! }, (_, t) => ids[(k * take[j]! + t) % ids.length]!);
      }),
    );
  }
  const inOneDatabase = lists(50, ["0/0", "0/1"], [5, 5]);
  const inFourShards = lists(50, ["0/0", "0/1", "1/0", "1/1"], [3, 2, 3, 2]);
  const byHand = inFourShards.map(
    (list) =>
      [
        list.filter((id) => ShardedUUID.shardOf(id).group === 0),
        list.filter((id) => ShardedUUID.shardOf(id).group === 1),
      ] as const,
  );
  const inTenShards = lists(
    50,
    [0, 1, 2, 3, 4].flatMap((m) => [`0/${m}`, `1/${m}`]),
    Array(10).fill(1),
  );

  // ---------------------------------------------------------------------------------------------
  // Measuring
  // ---------------------------------------------------------------------------------------------

  const us = (ms: number) => `${(ms * 1000).toFixed(0)} µs`;
  const fixed = (x: number) => x.toFixed(3);
  const measure = (variants: Variant[]) => timed(variants, WARMUP, ROUNDS);

  type Customers = {
    customer: {
      findUnique(args: any): PromiseLike<unknown>;
      findMany(args: any): PromiseLike<unknown[]>;
      create(args: any): PromiseLike<unknown>;
      update(args: any): PromiseLike<unknown>;
    };
  };
  /** One way of reaching a database: its model calls and its (shard) transaction. */
  type Way = {
    name: string;
    db: Customers;
    transaction(id: string, fn: (tx: Customers) => Promise<unknown>): PromiseLike<unknown>;
  };
  type Interactive = Customers & {
    $transaction<R>(fn: (tx: Customers) => Promise<R>): PromiseLike<R>;
  };
  /** A database's own client (plain or with the pass-through extension): `$transaction` for the shard transaction. */
  const wayOf = (name: string, client: Interactive): Way => ({
    name,
    db: client,
    transaction: (_id, fn) => client.$transaction((tx) => fn(tx)),
  });
  const routedWay: Way = {
    name: "routed (extension on A)",
    db: routed,
    transaction: (id, fn) => routed.$transactionOn(id, (tx) => fn(tx)),
  };

  const OPERATIONS: {
    name: string;
    run(way: Way, ids: string[], s: ShardIdentifier, i: number): PromiseLike<unknown>;
  }[] = [
    {
      name: "`findUnique` by id",
      run: (way, ids, _s, i) => way.db.customer.findUnique({ where: { id: ids[i % ids.length]! } }),
    },
    {
      name: "`create`",
      run: (way, _ids, s) =>
        way.db.customer.create({ data: { id: ShardedId.generate("Customer", s), name: "n", region: "eu" } }),
    },
    {
      name: "`update` by id",
      run: (way, ids, _s, i) =>
        way.db.customer.update({ where: { id: ids[i % ids.length]! }, data: { name: `u${i}` } }),
    },
    {
      name: "shard transaction: findUnique, update, create",
      run: (way, ids, s, i) => {
        const id = ids[(i * 7) % ids.length]!;
        return way.transaction(id, async (tx) => {
          await tx.customer.findUnique({ where: { id } });
          await tx.customer.update({ where: { id }, data: { name: `t${i}` } });
          await tx.customer.create({
            data: { id: ShardedId.generate("Customer", s), name: "t", region: "eu" },
          });
        });
      },
    },
  ];

  type Row = { operation: string; medians: number[] };
  async function latencyGroup(title: string, ways: Way[], ids: string[], s: ShardIdentifier): Promise<Row[]> {
    const rows: Row[] = [];
    for (const op of OPERATIONS) {
      const medians = await measure(
        ways.map((way) => ({ name: way.name, run: (i) => op.run(way, ids, s, i) })),
      );
      rows.push({ operation: op.name, medians });
    }
    console.log(`\n### ${title}\n`);
    console.log(
      `(${ROUNDS} calls per variant and operation, interleaved; medians; ratio against ${ways[0]!.name})\n`,
    );
    console.log(
      `| operation | ${ways[0]!.name} | ${ways
        .slice(1)
        .map((w) => `${w.name} | ratio`)
        .join(" | ")} |`,
    );
    console.log(
      `|---|---|${ways
        .slice(1)
        .map(() => "---|---|")
        .join("")}`,
    );
    for (const row of rows) {
      const base = row.medians[0]!;
      const rest = row.medians.slice(1).map((m) => `${us(m)} | ${fixed(m / base)}`);
      console.log(`| ${row.operation} | ${us(base)} | ${rest.join(" | ")} |`);
    }
    return rows;
  }

  /** 64 callers, each awaiting `ITERATIONS` findUniques in turn; calls per second. */
  async function callers(db: Customers, ids: string[], iterations: number): Promise<number> {
    const start = performance.now();
    await Promise.all(
      Array.from({ length: CALLERS }, async (_, c) => {
        for (let k = 0; k < iterations; k++) {
          await db.customer.findUnique({ where: { id: ids[(c + k * CALLERS) % ids.length]! } });
        }
      }),
    );
    return (CALLERS * iterations) / ((performance.now() - start) / 1000);
  }

  // ---------------------------------------------------------------------------------------------
  // Run
  // ---------------------------------------------------------------------------------------------

  type Target = { name: string; target: string; measured: string; met: boolean | null };
  const targets: Target[] = [];
  /** A target per operation of a latency group: routed (its second way) over the database's own client (its first). */
  const routedOverOwn = (
    rows: { operation: string; medians: number[] }[],
    shardOn: string,
    limit: number,
  ) => {
    for (const row of rows) {
      const ratio = row.medians[1]! / row.medians[0]!;
      targets.push({
        name: `shard on ${shardOn}: ${row.operation}, routed / ${shardOn}'s own client`,
        target: `<= ${limit}`,
        measured: fixed(ratio),
        met: ratio <= limit,
      });
    }
  };
  const started = performance.now();
  {
    // Sanity: every variant answers what its baseline answers.
    const check = async (what: string, got: PromiseLike<unknown>, expected: number) => {
      const n = ((await got) as unknown[]).length;
      if (n !== expected) throw new Error(`${what}: ${n} rows, expected ${expected}`);
    };
    await check("10 ids on A", a.customer.findMany({ where: { id: { in: inOneDatabase[0]! } } }), 10);
    await check(
      "10 ids, 4 shards",
      routed.customer.findMany({ where: { id: { in: inFourShards[0]! } } }),
      10,
    );
    await check(
      "10 ids, 10 shards",
      routedPreSplit.customer.findMany({ where: { id: { in: inTenShards[0]! } } }),
      10,
    );
    if (!(await routed.customer.findUnique({ where: { id: idsOf("1/1")[0]! } })))
      throw new Error("no row on B");
    // A shard transaction installs the extension's AsyncLocalStorage (Node's async hooks then stay
    // enabled for every promise of the process); open one first so every measurement runs alike.
    await routed.$transactionOn(SHARD_A, async (tx) =>
      tx.customer.findUnique({ where: { id: idsOf("0/1")[0]! } }),
    );

    console.log(
      `Node ${process.version}, PostgreSQL on 127.0.0.1:${MAIN_PORT}, synchronous_commit = off, BENCH_ROUNDS=${ROUNDS}, Prisma errorFormat ${ERROR_FORMAT}`,
    );

    // 1 and 3: a shard on A.
    const g1 = await latencyGroup(
      "1. Shard on database A, the database the extension is installed on",
      [wayOf("A's own client", a), routedWay, wayOf("empty pass-through extension on A", passA)],
      idsOf("0/1"),
      SHARD_A,
    );
    routedOverOwn(g1, "A", 1.02);

    // 2 and 3: a shard on B, the extension still installed on A.
    const g2 = await latencyGroup(
      "2. Shard on database B, the extension installed on A's client",
      [wayOf("B's own client", b), routedWay, wayOf("empty pass-through extension on B", passB)],
      idsOf("1/1"),
      SHARD_B,
    );
    routedOverOwn(g2, "B", 1.05);

    // 4: `in` lists.
    const inVariants: Variant[] = [
      {
        name: "A's own client, 10 ids all on A",
        run: (i) => a.customer.findMany({ where: { id: { in: inOneDatabase[i % 50]! } } }),
      },
      {
        name: "routed, 10 ids of 4 shards on 2 databases",
        run: (i) => routed.customer.findMany({ where: { id: { in: inFourShards[i % 50]! } } }),
      },
      {
        name: "routed, 10 ids of 10 shards on 2 databases (pre-split, 5 shards per database)",
        run: (i) => routedPreSplit.customer.findMany({ where: { id: { in: inTenShards[i % 50]! } } }),
      },
      {
        // The floor: the same two statements written by hand, without shardkit.
        name: "by hand, no shardkit: A's and B's own clients in parallel, the 4-shard list split",
        run: (i) =>
          Promise.all([
            a.customer.findMany({ where: { id: { in: byHand[i % 50]![0] } } }),
            b.customer.findMany({ where: { id: { in: byHand[i % 50]![1] } } }),
          ]).then(([x, y]) => [...x, ...y]),
      },
    ];
    const inMedians = await measure(inVariants);
    // Counting pass (not timed): statements per call on A and on B.
    const inStatements = [
      await statementsOf(() => countA.customer.findMany({ where: { id: { in: inOneDatabase[0]! } } })),
      await statementsOf(() => countRouted.customer.findMany({ where: { id: { in: inFourShards[0]! } } })),
      await statementsOf(() => countPreSplit.customer.findMany({ where: { id: { in: inTenShards[0]! } } })),
      await statementsOf(() =>
        Promise.all([
          countA.customer.findMany({ where: { id: { in: byHand[0]![0] } } }),
          countB.customer.findMany({ where: { id: { in: byHand[0]![1] } } }),
        ]),
      ),
    ];
    console.log("\n### 4. `findMany` with `where: { id: { in: ids } }`, 10 ids\n");
    console.log(
      `(${ROUNDS} calls per variant, interleaved; medians; ratio against one database's own client. ` +
        "Statements per call on A + B: a separate, untimed pass)\n",
    );
    console.log("| variant | median | ratio | statements (A + B) |\n|---|---|---|---|");
    inVariants.forEach((v, j) => {
      const [onA, onB] = inStatements[j]!;
      console.log(
        `| ${v.name} | ${us(inMedians[j]!)} | ${fixed(inMedians[j]! / inMedians[0]!)} | ${onA} + ${onB} |`,
      );
    });
    const in4 = inMedians[1]! / inMedians[0]!;
    const in10 = inMedians[2]! / inMedians[0]!;
    targets.push({
      name: "`in` list, 10 ids of 4 shards on 2 databases / 10 ids on one database",
      target: "<= 1.3",
      measured: fixed(in4),
      met: in4 <= 1.3,
    });
    targets.push({
      name: "`in` list, 10 ids of 10 shards on 2 databases / 10 ids on one database",
      target: "(none stated; 1.3 for 4 shards)",
      measured: fixed(in10),
      met: null,
    });
    targets.push({
      name: "`in` list, 10 ids of 4 shards on 2 databases / the same two statements by hand",
      target: "(the floor on this machine)",
      measured: fixed(inMedians[1]! / inMedians[3]!),
      met: null,
    });

    // 5: throughput, 64 concurrent callers.
    const ids = idsOf("0/1");
    const ways: [string, Customers][] = [
      ["A's own client", a],
      ["routed (extension on A)", routed],
    ];
    for (const [, db] of ways) await callers(db, ids, ITERATIONS); // warm-up
    const rates = ways.map(() => [] as number[]);
    for (let r = 0; r < THROUGHPUT_RUNS; r++) {
      for (let k = 0; k < ways.length; k++) {
        const j = (r + k) % ways.length;
        rates[j]!.push(await callers(ways[j]![1], ids, ITERATIONS));
      }
    }
    const rate = rates.map(median);
    // Counting pass (not timed): the same callers through clients that report every statement.
    const count = async (db: Customers) => {
      const [onA, onB] = await statementsOf(() => callers(db, ids, COUNT_ITERATIONS));
      return onA + onB;
    };
    const counted = [await count(countA), await count(countRouted)];
    const calls = CALLERS * COUNT_ITERATIONS;
    console.log(`\n### 5. Throughput: ${CALLERS} concurrent callers, findUnique by id (shard on A)\n`);
    console.log(
      `(${CALLERS} callers x ${ITERATIONS} calls per run, ${THROUGHPUT_RUNS} runs per variant alternating; median run. ` +
        `Statements: a separate, untimed pass of ${CALLERS} x ${COUNT_ITERATIONS} = ${calls} calls)\n`,
    );
    console.log("| variant | calls/s | ratio | statements for " + calls + " calls |\n|---|---|---|---|");
    ways.forEach(([name], j) => {
      console.log(`| ${name} | ${rate[j]!.toFixed(0)} | ${fixed(rate[j]! / rate[0]!)} | ${counted[j]} |`);
    });
    const tp = rate[1]! / rate[0]!;
    targets.push({
      name: `throughput, ${CALLERS} concurrent callers, routed / A's own client (calls/s)`,
      target: ">= 0.95",
      measured: fixed(tp),
      met: tp >= 0.95,
    });
    targets.push({
      name: `findUnique batching kept: statements for ${calls} concurrent calls, routed (A's own client: ${counted[0]})`,
      target: `<= ${counted[0]} (as batched as A's own client)`,
      measured: String(counted[1]),
      met: counted[1]! <= counted[0]!,
    });

    console.log("\n### Summary\n");
    console.log("| target | wanted | measured | met |\n|---|---|---|---|");
    for (const t of targets) {
      console.log(
        `| ${t.name} | ${t.target} | ${t.measured} | ${t.met === null ? "-" : t.met ? "yes" : "NO"} |`,
      );
    }
    console.log(`\n(${((performance.now() - started) / 1000).toFixed(0)} s)`);
  }
}
