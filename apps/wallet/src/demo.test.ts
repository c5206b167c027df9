import { patient, runProgram } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";

describe("the demo (tsx src/demo.ts)", () => {
  it(
    "runs on embedded PGlite shards with no configuration, and money is conserved",
    async ({ signal }) => {
      // Without SHARDKIT_SHARDS: the demo's default, embedded databases.
      const output = await runProgram("src/demo.ts", {
        cwd: new URL("..", import.meta.url).pathname,
        env: { SHARDKIT_SHARDS: undefined },
        signal,
      });
      expect(output).toContain("embedded PGlite, one database per shard");
      expect(output).toMatch(/Ana -> Ana savings, 25.00 \(same shard: one transaction\): HTTP 201 completed/);
      expect(output).toMatch(/Ana -> Carla EUR: completed/);
      expect(output).toMatch(/Bruno -> Diego MXN: refunded \(destination holds MXN, not EUR\)/);
      expect(output).toContain("HTTP 409 INSUFFICIENT_FUNDS");
      expect(output).toContain("Bruno withdraws from Ana's wallet: HTTP 404 NOT_FOUND");
      expect(output).toContain("no credential: HTTP 401 UNAUTHENTICATED");
      expect(output).toMatch(/total EUR: 200.00 = deposits 200.00 - withdrawals 0.00: conserved/);
      expect(output).toMatch(/total MXN: 200.00 = deposits 200.00 - withdrawals 0.00: conserved/);
    },
    patient(120_000),
  );
});
