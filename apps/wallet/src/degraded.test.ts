import { randomUUID } from "node:crypto";
import { ShardedUUID } from "@shardkit/id";
import {
  createDatabase,
  dropDatabase,
  MAIN_PORT,
  patient,
  withClusterStopped,
  within,
} from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildApp } from "./app.js";
import { openShards, type Shards } from "./shards.js";
import { auth, bearer, operator } from "./test/auth.js";
import { WalletService } from "./wallet-service.js";

const SECOND = inject("second"); // the run's own second server, which the tests stop

// Fresh databases (no schema yet) for this file; shard 1/1's is on the second server.
const names = [`sk_wallet_deg_a_${process.pid}`, `sk_wallet_deg_b_${process.pid}`];
const secondSkipped = inject("secondSkipped"); // why the tests that stop the second server cannot run, or ""
let urls: { main: string; second: string };
beforeAll(async () => {
  if (secondSkipped) return;
  urls = {
    main: await createDatabase(MAIN_PORT, names[0]!),
    second: await createDatabase(SECOND.port, names[1]!),
  };
});
afterAll(async () => {
  if (secondSkipped) return;
  await dropDatabase(MAIN_PORT, names[0]!);
  await dropDatabase(SECOND.port, names[1]!);
});

describe("degraded, not down", () => {
  it(
    "starts while shard 1/1's server is down: 503 naming 1/1 for its customers, the others served, /health says which; when the server returns its schema is rolled out and 1/1 is served",
    async ({ skip }) => {
      skip(secondSkipped !== "", secondSkipped);
      const lines: string[] = [];
      let shards: Shards | undefined;
      try {
        await withClusterStopped(SECOND.cluster, SECOND.port, async () => {
          shards = await openShards({
            shardsJson: JSON.stringify([
              { group: 0, member: 0, url: urls.main },
              { group: 0, member: 1, url: urls.main },
              { group: 1, member: 0, url: urls.main },
              { group: 1, member: 1, url: urls.second },
            ]),
            retry: { baseMs: 50, maxMs: 250 },
            log: (line) => lines.push(line),
          });
          const app = buildApp(new WalletService(shards, { deadlineMs: 3000 }), { auth });
          const post = (url: string, body: unknown) =>
            app.inject({
              method: "POST",
              url,
              payload: body as object,
              headers: { "idempotency-key": randomUUID(), ...bearer(operator) },
            });

          const health = await app.inject({ method: "GET", url: "/health" });
          expect(health.statusCode).toBe(200);
          expect(health.json().status).toBe("degraded");
          expect(
            health.json().shards.map((s: { shard: string; state: string }) => [s.shard, s.state]),
          ).toEqual([
            ["0/0", "up"],
            ["0/1", "up"],
            ["1/0", "up"],
            ["1/1", "starting"],
          ]);
          expect(lines.some((l) => /shards 1\/1 on .*: starting/.test(l))).toBe(true);

          // Mexican tenants are spread over 1/0 and 1/1: those on 1/0 are served, those on 1/1 get 503.
          const answers = new Map<string, number[]>();
          for (let t = 0; t < 12; t++) {
            const res = await post("/customers", { name: `mx-${t}`, region: "MX", tenant: `deg-${t}` });
            const key = res.statusCode === 201 ? ShardedUUID.shardOf(res.json().id).key : res.json().shard;
            answers.set(key, [...(answers.get(key) ?? []), res.statusCode]);
            if (res.statusCode === 503) {
              expect(res.json()).toMatchObject({ error: "SHARD_UNAVAILABLE", shard: "1/1" });
              expect(res.headers["retry-after"]).toBe("1");
            }
          }
          expect(new Set(answers.get("1/0"))).toEqual(new Set([201]));
          expect(new Set(answers.get("1/1"))).toEqual(new Set([503]));
          await app.close();
        });

        // The server is back: the retries roll the schema out to 1/1's database and open it.
        await within(shards!.ready, 30_000, "1/1 becoming ready");
        const app = buildApp(new WalletService(shards!, { deadlineMs: 3000 }), { auth });
        const health = await app.inject({ method: "GET", url: "/health" });
        expect(health.json().status).toBe("ok");
        for (let t = 0; t < 12; t++) {
          const res = await app.inject({
            method: "POST",
            url: "/customers",
            payload: { name: `mx-${t}`, region: "MX", tenant: `deg-${t}` },
            headers: { "idempotency-key": randomUUID(), ...bearer(operator) },
          });
          expect(res.statusCode).toBe(201);
        }
        expect(lines.some((l) => /schema 1\/1 .*sk_wallet_deg_b.*: applied/.test(l))).toBe(true);
        expect(lines.some((l) => /shards 1\/1 on .*: ready/.test(l))).toBe(true);
        await app.close();
      } finally {
        await shards?.close();
      }
    },
    patient(120_000),
  );
});
