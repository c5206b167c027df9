// pnpm bench (in packages/prisma): what each way of naming a row's shard costs, as a ratio against
// the database's own client doing the same call in the same run. One database holds both shards,
// so only routing differs. Calls alternate between the variants (rotating order); medians.
//
//   findUnique by a ShardedUUID id, by a legacy v4 id, by a column through a function (byColumn),
//   by a hash (byHash), by a directory with its answer cached and with every call looked up
//   (byDirectory, ttlMs 0, the lookup an in-memory Map), by an email unique across shards (a claim
//   read, then the row); create with and without a claim.
//
// BENCH_ROUNDS (default 1500): timed calls per variant.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { byColumn, byDirectory, byHash, createShardRegistry, shardRouting } from "../src/index.js";
import { PrismaClient } from "../test/generated/prisma/client.js";
import { type BenchDatabase, onBenchDatabase, measure as timed, type Variant } from "./measure.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1500);
const WARMUP = 500;
const A = ShardIdentifier.of(0, 0);
const B = ShardIdentifier.of(0, 1);

await onBenchDatabase("strategies", run, { asyncCommit: true });

async function run({ url, clients }: BenchDatabase): Promise<void> {
  const client = new PrismaClient({
    adapter: new PrismaPg({ connectionString: url }),
    errorFormat: "minimal",
  });
  clients.push(client);
  const registry = createShardRegistry({
    shards: [
      { shard: A, client },
      { shard: B, client },
    ],
  });
  const directory = new Map<string, ShardIdentifier>();
  const route = (keys: unknown[]) =>
    client.$extends(shardRouting({ registry, legacy: "0/0", models: { Setting: { keys: keys as never } } }));
  const byId = client.$extends(
    shardRouting({
      registry,
      legacy: "0/0",
      models: { Customer: { unique: { email: true }, place: () => B } },
    }),
  );
  const column = route([byColumn("name", (v) => ((v as string).length % 2 ? A : B))]);
  const hash = route([byHash("name", [A, B])]);
  const cached = route([byDirectory("name", { lookup: (v) => directory.get(v), ttlMs: 3_600_000 })]);
  const uncached = route([byDirectory("name", { lookup: (v) => directory.get(v), ttlMs: 0 })]);

  const N = 200;
  const sharded: string[] = [];
  const legacy: string[] = [];
  const emails: string[] = [];
  const settings: string[] = [];
  for (let i = 0; i < N; i++) {
    const id = ShardedUUID.generate(i % 2 ? A : B);
    const email = `user${i}@example.com`;
    await byId.customer.create({ data: { id, name: `c${i}`, region: "eu", email } });
    sharded.push(id);
    emails.push(email);
    const old = crypto.randomUUID();
    await client.customer.create({ data: { id: old, name: `l${i}`, region: "eu" } });
    legacy.push(old);
    const s = `setting-${i}`;
    await client.setting.create({ data: { name: s, value: "v" } });
    directory.set(s, i % 2 ? A : B);
    settings.push(s);
  }

  const measure = (variants: Variant[]) => timed(variants, WARMUP, ROUNDS);

  const reads = await measure([
    {
      name: "own client, findUnique by id",
      run: (i) => client.customer.findUnique({ where: { id: sharded[i % N]! } }),
    },
    { name: "ShardedUUID id", run: (i) => byId.customer.findUnique({ where: { id: sharded[i % N]! } }) },
    { name: "legacy v4 id", run: (i) => byId.customer.findUnique({ where: { id: legacy[i % N]! } }) },
    {
      name: "own client, findUnique by name",
      run: (i) => client.setting.findUnique({ where: { name: settings[i % N]! } }),
    },
    { name: "byColumn", run: (i) => column.setting.findUnique({ where: { name: settings[i % N]! } }) },
    { name: "byHash", run: (i) => hash.setting.findUnique({ where: { name: settings[i % N]! } }) },
    {
      name: "byDirectory, cached",
      run: (i) => cached.setting.findUnique({ where: { name: settings[i % N]! } }),
    },
    {
      name: "byDirectory, looked up",
      run: (i) => uncached.setting.findUnique({ where: { name: settings[i % N]! } }),
    },
    {
      name: "own client, findUnique by email",
      run: (i) => client.customer.findUnique({ where: { email: emails[i % N]! } }),
    },
    {
      name: "email unique across shards",
      run: (i) => byId.customer.findUnique({ where: { email: emails[i % N]! } }),
    },
  ]);
  const [own, id, old, ownName, col, hsh, dirC, dirU, ownEmail, email] = reads as number[];
  const f = (x: number) => x.toFixed(2);
  const us = (ms: number) => `${(ms * 1000).toFixed(0)} µs`;
  console.log("| findUnique routed by | median | ratio to the database's own client |");
  console.log("|---|---|---|");
  console.log(`| ShardedUUID \`id\` | ${us(id!)} | ${f(id! / own!)} |`);
  console.log(`| legacy v4 \`id\` (\`legacy: "0/0"\`) | ${us(old!)} | ${f(old! / own!)} |`);
  console.log(`| \`byColumn("name", fn)\` | ${us(col!)} | ${f(col! / ownName!)} |`);
  console.log(`| \`byHash("name", shards)\` | ${us(hsh!)} | ${f(hsh! / ownName!)} |`);
  console.log(`| \`byDirectory\`, answer cached | ${us(dirC!)} | ${f(dirC! / ownName!)} |`);
  console.log(
    `| \`byDirectory\`, looked up each call (in-memory lookup) | ${us(dirU!)} | ${f(dirU! / ownName!)} |`,
  );
  console.log(
    `| \`email\` unique across shards (claim read, then the row) | ${us(email!)} | ${f(email! / ownEmail!)} |`,
  );

  let n = 0;
  const writes = await measure([
    {
      name: "own client create",
      run: () =>
        client.customer.create({
          data: { id: ShardedUUID.generate(B), name: "w", region: "eu", email: `own${n++}@x.com` },
        }),
    },
    {
      name: "routed create, id filled in",
      run: () =>
        byId.customer.create({
          data: { name: "w", region: "eu" } as { id: string; name: string; region: string },
        }),
    },
    {
      name: "routed create with a claim",
      run: () =>
        byId.customer.create({
          data: { name: "w", region: "eu", email: `new${n++}@x.com` } as {
            id: string;
            name: string;
            region: string;
            email: string;
          },
        }),
    },
  ]);
  const [ownCreate, filled, claimed] = writes as number[];
  console.log(`| create, id filled in by \`place\` | ${us(filled!)} | ${f(filled! / ownCreate!)} |`);
  console.log(
    `| create with a claim (claim, row transaction, hold) | ${us(claimed!)} | ${f(claimed! / ownCreate!)} |`,
  );
}
