import { patient } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { demo, expectSoldOutOnce, expectStepsAnnounced } from "./test/demo-output.js";

describe("the demo (tsx src/demo.ts)", () => {
  it(
    "embedded PGlite: two desks sell out B-173 while its shard moves offline: every unit confirmed once, the stale desk refused and retried",
    async ({ signal }) => {
      const output = await demo(signal);
      expect(output).toContain("bucket B-173 (1000 units) on shard 0/1, in db-a");
      expect(output).toContain("confirmations: 1000 answered, 1000 recorded in db-new (capacity 1000)");
      expectSoldOutOnce(output, "offline");
      expectStepsAnnounced(output, /^opening 3 embedded PGlite databases/);
      // Each database's schema push (the first compiles the engine) is announced before it runs.
      const schema = output.split("\n").filter((line) => /^ {2}schema \d\/3 /.test(line));
      expect(schema).toEqual(
        ["db-a", "db-b", "db-new"].map((db, i) => `  schema ${i + 1}/3 ${db}: applying`),
      );
    },
    patient(120_000),
  );
});
