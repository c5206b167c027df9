import { patient, runProgram, testCluster } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { databasesFor, PACKAGE_NAME } from "./test/databases.js";

/** Runs the demo (tsx src/demo.ts) with `env` and returns what it printed; `signal` (the test's) kills it. */
const demo = (signal: AbortSignal, env: Record<string, string> = {}) =>
  runProgram("src/demo.ts", { cwd: new URL("..", import.meta.url).pathname, env, signal });

/** What every run of the demo must show, whatever its databases. */
function expectSoldOutOnce(output: string, mode: "live" | "offline") {
  expect(output).toContain("bucket B-173 (1000 units) on shard 0/1, in ");
  expect(output).toMatch(
    new RegExp(
      `moved shard 0/1 from .+ to .+ \\(epoch 2, ${mode}\\) while the desks confirmed: writes held \\d+ ms, \\d+ ms in all`,
    ),
  );
  expect(output).toMatch(/confirmations: 1000 answered, 1000 recorded in .+ \(capacity 1000\)/);
  expect(output).toContain("double decisions: 0");
  expect(output).toMatch(/desk two: [1-9]\d* stale-route rejections/);
  // The demo retries the key of whichever desk confirmed first: on PostgreSQL either desk may.
  expect(output).toMatch(/retrying desk (one|two)'s first key: HTTP 201, the recorded confirmation/);
}

/**
 * Each long step of the demo is announced by a line printed before it starts, in this order, so a
 * person watching is never left without a word while the step runs (however slow the machine).
 */
function expectStepsAnnounced(output: string, opening: RegExp) {
  const lines = output.split("\n");
  const steps = [
    opening,
    /^opening two desks/,
    /^bucket B-173/,
    /^the desks confirm B-173's units/,
    /^moving shard 0\/1 to .+ while the desks go on/,
    /^ {2}1000 units confirmed$/,
    /^moved shard 0\/1/,
  ];
  const at = steps.map((step) => lines.findIndex((line) => step.test(line)));
  expect(
    at.filter((i) => i < 0),
    `a step without its line:\n${output}`,
  ).toEqual([]);
  expect(at).toEqual([...at].sort((a, b) => a - b));
}

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

  describe("on PostgreSQL (SHARDKIT_SHARDS)", () => {
    // The source's server needs wal_level = logical: a cluster of the project's own, named after its
    // package and dropped after the test (SHARDKIT_TEST_CLUSTER=<name>:<port> names another). Where
    // the test may not make one (helpers that refuse with CLUSTERS_UNAVAILABLE say why), it is skipped.
    const run = databasesFor(
      "the live move on PostgreSQL",
      {
        names: [`sk_alloc_demo_b_${process.pid}`, `sk_alloc_demo_new_${process.pid}`],
        onServer: [`sk_alloc_demo_a_${process.pid}`],
        server: testCluster(PACKAGE_NAME),
        logical: true,
      },
      120_000,
    );

    it(
      "moves the shard live while the desks confirm: the same guarantees",
      async ({ skip, signal }) => {
        const [b, fresh, a] = run(skip);
        const shards = JSON.stringify({
          shards: [
            { group: 0, member: 0, url: a },
            { group: 0, member: 1, url: a },
            { group: 1, member: 0, url: b },
          ],
          databases: [{ url: fresh }],
        });
        const output = await demo(signal, { SHARDKIT_SHARDS: shards });
        expect(output).toContain(`recorded in ${fresh}`);
        expectSoldOutOnce(output, "live");
        expectStepsAnnounced(output, /^opening the PostgreSQL databases of SHARDKIT_SHARDS/);
      },
      patient(120_000),
    );
  });
});
