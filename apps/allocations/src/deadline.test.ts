import { randomUUID } from "node:crypto";
import { httpClient, patient, testCluster, withClusterFrozen, within } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { AllocationService } from "./allocation-service.js";
import { buildApp } from "./app.js";
import { openServiceRouter } from "./shards.js";
import { auth, operator } from "./test/auth.js";
import { databasesFor, PACKAGE_NAME } from "./test/databases.js";

// Shards 0/0 and 0/1 on the machine's server, 1/0 on a server of this file's own (named after
// FROZEN, on a port of its own) that the test freezes (SIGSTOP: connections hang, nothing is refused). Where the test may not make a server
// (helpers that refuse with CLUSTERS_UNAVAILABLE say why), it is skipped.
const FROZEN = testCluster(`${PACKAGE_NAME}/frozen`);
const run = databasesFor(
  "the frozen-server test",
  {
    names: [`sk_alloc_deadline_a_${process.pid}`],
    onServer: [`sk_alloc_deadline_f_${process.pid}`],
    server: FROZEN,
  },
  120_000,
);

describe("allocations with a frozen database", () => {
  it(
    "each call on its shard answers 503 SHARD_UNAVAILABLE naming the shard at the deadline; the other shards are served; a retried key applies the command once",
    async ({ skip }) => {
      const urls = run(skip);
      const router = await openServiceRouter({
        shardsJson: JSON.stringify([
          { group: 0, member: 0, url: urls[0] },
          { group: 0, member: 1, url: urls[0] },
          { group: 1, member: 0, url: urls[1] },
        ]),
        dataDir: "/nonexistent",
        poll: false,
        load: false,
      });
      const app = buildApp(new AllocationService(router, { deadlineMs: 1000 }), { auth });
      const call = httpClient(app, { token: operator });
      try {
        const served = (await call("POST", "/buckets", { name: "served", capacity: 5, shard: "0/0" })).body
          .id;
        const frozen = (await call("POST", "/buckets", { name: "frozen", capacity: 5, shard: "1/0" })).body
          .id;
        const holdKey = randomUUID();
        // Each call bounded (test-db's `within`, scaled by the load): a request never holds the frozen
        // server, and the test, for ever; not a claim about speed.
        const answers = await withClusterFrozen(run.server().cluster, async () => ({
          hold: await within(
            call("POST", `/buckets/${frozen}/holds`, { units: 2, desk: "one" }, holdKey),
            60_000,
            "the hold on the frozen shard",
          ),
          create: await within(
            call("POST", "/buckets", { name: "new", capacity: 1, shard: "1/0" }),
            60_000,
            "the create on the frozen shard",
          ),
          read: await within(call("GET", `/buckets/${frozen}`), 60_000, "the read on the frozen shard"),
          other: await within(
            call("POST", `/buckets/${served}/holds`, { units: 1, desk: "one" }),
            60_000,
            "the hold on a served shard",
          ),
        }));
        for (const answer of [answers.hold, answers.create, answers.read]) {
          expect(answer).toMatchObject({
            status: 503,
            headers: { "retry-after": "1" },
            body: {
              error: "SHARD_UNAVAILABLE",
              shard: "1/0",
              message: expect.stringContaining("did not answer within 1000 ms"),
            },
          });
        }
        // A command past its deadline may still commit when the server wakes: the answer says so.
        expect(answers.hold).toMatchObject({ body: { outcome: "unknown" } });
        expect(answers.other).toMatchObject({ status: 201 });
        // The server back, the hold sent again with its key: applied once, whatever the first did.
        const again = await call("POST", `/buckets/${frozen}/holds`, { units: 2, desk: "one" }, holdKey);
        expect(again.status).toBe(201);
        expect((await call("GET", `/buckets/${frozen}`)).body).toMatchObject({ held: 2 });
      } finally {
        await app.close();
        await router.close();
      }
    },
    patient(180_000),
  );
});
