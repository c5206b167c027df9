import { type ChildProcess, spawn } from "node:child_process";
import { ShardedId } from "@shardkit/id";
import { patient } from "@shardkit/test-db";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { confirm } from "../test/confirm.js";
import { lineReader } from "../test/lines.js";
import { reset, router, S, transfer } from "../test/world.js";

// The seed's race: allocation bucket B-173 has one unit left. Two desks, each its own router
// process, confirm it with their own idempotency keys while ownership of its shard moves from
// database a to database e; one desk's map is stale (read before the move, never polled).
const r = router();
const desks: ChildProcess[] = [];
afterAll(async () => {
  for (const d of desks) d.kill("SIGKILL");
  await r.close();
});
beforeEach(() => reset());

interface Outcome {
  desk: string;
  outcome: "confirmed" | "refused" | "failed";
  error?: string;
  confirmation?: string;
  replayed: boolean;
  landedOn: string;
  counters: { staleRejections: number; retries: number; refreshes: number };
}

/** A desk process, ready to confirm on "go". */
async function desk(name: string, bucket: string, key: string) {
  const child = spawn(process.execPath, ["--import", "tsx", "test/desk.ts"], {
    cwd: new URL("..", import.meta.url).pathname,
    env: {
      ...process.env,
      OWNERSHIP_URLS: JSON.stringify(inject("ownershipUrls")),
      DESK: name,
      BUCKET: bucket,
      KEY: key,
    },
    stdio: ["pipe", "pipe", "inherit"],
  });
  desks.push(child);
  const next = lineReader(child, `desk ${name}`);
  expect(await next()).toBe("ready");
  return {
    go: async (): Promise<Outcome> => {
      child.stdin!.write("go\n");
      return JSON.parse(await next()) as Outcome;
    },
  };
}

describe("the seed's race", () => {
  it(
    "two desks confirm the last unit of B-173 while its shard moves: exactly one confirmation, a clear refusal, the winner's key returns the recorded decision, the stale router's refusal is counted and its retry lands on the new owner",
    async () => {
      const map = await r.open();
      const bucket = ShardedId.generate("Bucket", S.g0m1);
      await r.db.bucket.create({ data: { id: bucket, name: "B-173", remaining: 1 } });
      // Both desks read the map now, while a owns B-173's shard.
      const [one, two] = await Promise.all([
        desk("one", bucket, "desk-one-key-1"),
        desk("two", bucket, "desk-two-key-1"),
      ]);

      // Desk one confirms as the move begins; desk two (stale) confirms once the old owner is fenced.
      const first = one.go();
      let second: Promise<Outcome> | undefined;
      await transfer(map, S.g0m1, r.databases.e, async () => {
        second = two.go();
      });
      const outcomes = await Promise.all([first, second!]);
      expect(outcomes.filter((o) => o.outcome === "failed")).toEqual([]);

      // Exactly one confirmation, at the owner; the other desk was told it is sold out.
      const winner = outcomes.find((o) => o.outcome === "confirmed")!;
      const loser = outcomes.find((o) => o.outcome === "refused")!;
      expect(winner).toBeDefined();
      expect(loser).toBeDefined();
      expect(await r.clients.e.confirmation.findMany({ where: { bucketId: bucket } })).toEqual([
        { id: winner.confirmation, bucketId: bucket, desk: winner.desk },
      ]);
      expect((await r.clients.e.bucket.findUnique({ where: { id: bucket } }))?.remaining).toBe(0);

      // The stale desk was refused by the fenced owner, refreshed, and decided at the new owner.
      const stale = outcomes.find((o) => o.desk === "two")!;
      expect(stale.counters.staleRejections).toBeGreaterThanOrEqual(1);
      expect(stale.counters.retries).toBeGreaterThanOrEqual(1);
      expect(stale.landedOn).toBe("e");

      // Retrying the winner's key (from another router, after the move) returns the recorded decision.
      const again = await confirm(r.db, {
        bucketId: bucket,
        desk: winner.desk,
        key: `desk-${winner.desk}-key-1`,
      });
      expect(again).toEqual({
        desk: winner.desk,
        outcome: "confirmed",
        confirmation: winner.confirmation,
        replayed: true,
      });
      expect(await r.clients.e.confirmation.count({ where: { bucketId: bucket } })).toBe(1);
      map.close();
    },
    patient(120_000),
  );
});
