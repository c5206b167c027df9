import { ShardedId, ShardedUUID } from "@shardkit/id";
import { shardRouting } from "@shardkit/prisma";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { beforeEach, describe, expect, inject, it } from "vitest";
import { stoppedMoves } from "../../test/stopped.js";
import { models, resetWithLoad, routers, S, TABLES } from "../../test/world.js";
import { isShardkitError } from "../errors.js";
import { readPartitionMap } from "../view.js";
import { type BalanceRun, runBalance } from "./run.js";

// A balance process (test/balancer.ts, live moves) killed with SIGKILL in the middle of its first
// move, then a balance run again: it takes the stopped move over, finishes or undoes it itself,
// and goes on to a balanced fleet, with no person in between. 0/0 and 0/1 on a, 1/0 on b, e spare;
// each shard as loaded as the others, so the balance moves one of a's two shards to e.
const urls = inject("moveUrls");
const make = routers(urls);
beforeEach(() => resetWithLoad(urls, make));
const { recordLoad, killedBalancer, LEASE_MS } = stoppedMoves(urls);

// Before the fence (undone), fenced (finished or undone), switched (finished).
describe.each(["verify", "final-position", "teardown"])(
  "a balance process killed with SIGKILL at %s of a live move",
  (step) => {
    it(
      "the next balance run takes the move over, finishes or undoes it, and balances the fleet; every acknowledged write is there once",
      async () => {
        const r = make();
        const map = await r.open();
        try {
          await recordLoad(r.clients.a);
          // Acknowledged writes on every shard, before and while the balancer works (and dies), by a
          // router that records no load of its own (the load is the windows above).
          const db = r.clients.a.$extends(shardRouting({ registry: r.registry, models, load: false }));
          const acked: string[] = [];
          const write = async (i: number) => {
            const shard = [S.g0m0, S.g0m1, S.g1m0][i % 3]!;
            const id = ShardedId.generate("Bucket", shard);
            await db.bucket.create({ data: { id, name: `w${i}`, remaining: i } });
            acked.push(id);
          };
          for (let i = 0; i < 30; i++) await write(i);
          let writing = true;
          const writer = (async () => {
            for (let i = 30; writing && i < 2000; i++) await write(i).catch(() => {});
          })();

          expect(await killedBalancer(step)).toBe("SIGKILL");
          // What it left: its move, stopped once its lease lapsed.
          await eventually("the dead balancer's move lease lapsed", async () => {
            const view = await readPartitionMap(r.registry);
            return (
              view.stopped.length === 1 && view.stopped[0]!.database === "a" && view.stopped[0]!.to === "e"
            );
          });

          // Run again, as a scheduler would: refused while the dead run's fleet lease lives, then it goes.
          let run: BalanceRun | undefined;
          await eventually("the dead balancer's fleet lease lapsed", async () => {
            try {
              run = await runBalance({
                registry: r.registry,
                map,
                tables: TABLES,
                mode: "live",
                sourceConnection: (source) => urls[source.name as "a" | "b" | "e"],
                leaseMs: LEASE_MS,
              });
              return true;
            } catch (error) {
              if (isShardkitError(error, "BALANCE_LEASE_HELD")) return false;
              throw error;
            }
          });
          writing = false;
          await writer;

          expect(run!.ok, run!.reason).toBe(true);
          expect(run!.moves[0]).toMatchObject({ kind: "takeover", status: "moved", from: "a", to: "e" });
          expect(run!.moves.every((m) => m.status === "moved")).toBe(true);
          // Balanced: one shard per database, and a plan made now proposes nothing.
          const view = await readPartitionMap(r.registry);
          expect([view.stopped, view.issues]).toEqual([[], []]);
          const owners = view.shards.map((p) => p.owner?.name).sort();
          expect(owners).toEqual(["a", "b", "e"]);
          const again = await runBalance({
            registry: r.registry,
            map,
            tables: TABLES,
            mode: "live",
            dryRun: true,
          });
          expect(again.plan!.moves).toEqual([]);
          expect(again.plan!.stoppedBy).toBe("balanced");
          // Every acknowledged write once, on its shard's owner.
          let found = 0;
          for (const name of ["a", "b", "e"] as const)
            found += await r.clients[name].bucket.count({ where: { id: { in: acked } } });
          expect(found).toBe(acked.length);
          for (const p of view.shards)
            expect(
              await r.clients[p.owner!.name as "a" | "b" | "e"].bucket.count({
                where: { id: { in: acked.filter((id) => ShardedUUID.shardOf(id).equals(p.shard)) } },
              }),
            ).toBe(acked.filter((id) => ShardedUUID.shardOf(id).equals(p.shard)).length);
        } finally {
          map.close();
        }
      },
      patient(120_000),
    );
  },
);
