import { patient, testCluster } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { databasesFor, PACKAGE_NAME } from "./test/databases.js";
import { demo, expectSoldOutOnce, expectStepsAnnounced } from "./test/demo-output.js";

describe("the demo (tsx src/demo.ts) on PostgreSQL (SHARDKIT_SHARDS)", () => {
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
