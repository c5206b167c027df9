import { patient, runProgram } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";

describe("the demo (tsx src/demo.ts)", () => {
  it(
    "runs on embedded PGlite shards with no configuration, and every credit limit holds",
    async ({ signal }) => {
      // Without SHARDKIT_SHARDS: the demo's default, embedded databases.
      const output = await runProgram("src/demo.ts", {
        cwd: new URL("..", import.meta.url).pathname,
        env: { SHARDKIT_SHARDS: undefined },
        signal,
      });
      expect(output).toContain("embedded PGlite, one database per shard");
      expect(output).toMatch(/Ana {4}DE\/acme {5}-> shard 0\/1/);
      expect(output).toMatch(/shard 1\/0: Elena\n/);
      expect(output).toMatch(/Bruno orders 90.00 more .*: HTTP 409 CREDIT_LIMIT_EXCEEDED/);
      expect(output).toContain("Ana (her own token) reads her order: HTTP 200; Bruno's: HTTP 404 NOT_FOUND");
      expect(output).toContain("no credential: HTTP 401 UNAUTHENTICATED");
      expect(output).toMatch(/Bruno cancels his 249.00 order: HTTP 200 cancelled/);
      expect(output).toMatch(/Bruno orders the 90.00 again: HTTP 201 placed/);
      expect(output).toMatch(/replayed: true, same order: true/);
      expect(output).toMatch(/page 3: .*Ana #1 placed 99.98 EUR\n/);
      expect(output).toMatch(/cancelled EUR +1 order\(s\) +249.00/);
      expect(output).toMatch(/the relay delivered 9 event\(s\)/);
      expect(output).toContain("order.placed x8, order.cancelled x1");
      expect(output).toContain("after: 0/0: 0 pending; 0/1: 0 pending; 1/0: 0 pending; 1/1: 0 pending");
      expect(output).not.toContain("OVER THE LIMIT");
      expect(output.match(/within the limit/g)).toHaveLength(5);
    },
    patient(120_000),
  );
});
