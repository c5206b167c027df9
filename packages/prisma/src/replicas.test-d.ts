import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { describe, expectTypeOf, it } from "vitest";
import { PrismaClient, type Wallet } from "../test/generated/prisma/client.js";
import { createShardRegistry, type ShardReplica, shardRouting } from "./index.js";

const make = (url: string) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
const client = make("postgresql://x/y");
const registry = createShardRegistry({
  shards: [{ shard: ShardIdentifier.DEFAULT, client }],
  databases: [
    { client, replicas: [make("postgresql://r1/y"), { client: make("postgresql://r2/y"), pool: 5 }] },
  ],
});
const db = client.$extends(shardRouting({ registry }));

describe("read replicas keep Prisma's types", () => {
  it("the registry's replicas are the registry's client type", () => {
    expectTypeOf(registry.databases[0]!.replicas).toEqualTypeOf<readonly ShardReplica<PrismaClient>[]>();
  });

  it("$primary() is the routed client itself, typed as it is", () => {
    expectTypeOf(db.$primary()).toEqualTypeOf<typeof db>();
    expectTypeOf(
      db.$primary().wallet.findUnique({ where: { id: "x" } }),
    ).resolves.toEqualTypeOf<Wallet | null>();
    const audited = db.$extends({ result: { customer: { label: { compute: () => "c" } } } });
    expectTypeOf(audited.$primary()).toEqualTypeOf<typeof audited>();
  });
});
