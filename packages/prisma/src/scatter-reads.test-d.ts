import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { describe, expectTypeOf, it } from "vitest";
import { PrismaClient, type Wallet } from "../test/generated/prisma/client.js";
import { createShardRegistry, type ScatterReport, shardRouting } from "./index.js";

const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: "postgresql://x/y" }) });
const registry = createShardRegistry({ shards: [{ shard: ShardIdentifier.DEFAULT, client }] });
const db = client.$extends(
  shardRouting({
    registry,
    keyless: { mode: "scatter", maxShards: 8, requireLimit: true },
    models: { Wallet: { keys: ["id", "customerId"], keyless: "refuse" } },
  }),
);

describe("scatter reads keep Prisma's types", () => {
  it("$scatter(options) returns the same client type, with typed options and report", () => {
    const view = db.$scatter({
      policy: "partial",
      onReport: (report) => expectTypeOf(report).toEqualTypeOf<ScatterReport>(),
    });
    expectTypeOf(view).toEqualTypeOf<typeof db>();
    expectTypeOf(view.wallet.findMany({ take: 5 })).resolves.toEqualTypeOf<Wallet[]>();
    // @ts-expect-error not a policy
    db.$scatter({ policy: "sometimes" });
    // @ts-expect-error keyless is 'refuse', 'scatter' or { mode: 'scatter', ... }
    shardRouting({ registry, keyless: "always" });
  });
});
