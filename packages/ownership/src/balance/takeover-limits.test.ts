import { ShardedId } from "@shardkit/id";
import { createShardRegistry, shardRouting } from "@shardkit/prisma";
import { patient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { beforeEach, describe, expect, inject, it } from "vitest";
import { stoppedMoves } from "../../test/stopped.js";
import { models, resetWithLoad, routers, S, TABLES } from "../../test/world.js";
import { isShardkitError } from "../errors.js";
import { readPartitionMap } from "../view.js";
import { type BalanceRun, type RunBalanceOptions, runBalance } from "./run.js";

// A stopped move (a balance process SIGKILLed in the middle of its first move, a to e) taken over
// under the run's limits: maxMoves, its signal and the p99 guard leave it stopped; a target that a
// placement rule forbids now (or that is being drained) gets the move undone, the shard kept on (or
// moved back to) a, instead of blocking every later run.
const urls = inject("moveUrls");
const make = routers(urls);
const { recordLoad, killedBalancer, LEASE_MS } = stoppedMoves(urls);
beforeEach(() => resetWithLoad(urls, make));

type Options = RunBalanceOptions<ReturnType<typeof make>["clients"]["a"]>;

/** A router over the same databases where group 0 may live only on region=eu, and e is in region us. */
function euOnly(r: ReturnType<typeof make>) {
  return createShardRegistry({
    shards: [
      { shard: S.g0m0, client: r.clients.a },
      { shard: S.g0m1, client: r.clients.a },
      { shard: S.g1m0, client: r.clients.b },
    ],
    databases: [
      { client: r.clients.a, name: "a", labels: { region: "eu" } },
      { client: r.clients.b, name: "b", labels: { region: "eu" } },
      { client: r.clients.e, name: "e", labels: { region: "us" } },
    ],
    placement: [{ groups: [0], labels: { region: "eu" } }],
  });
}

/** A balance run, again while the dead run's fleet lease lives (as a scheduler would). */
async function balanceAgain(options: Partial<Options> & Pick<Options, "registry">): Promise<BalanceRun> {
  let run: BalanceRun | undefined;
  await eventually("the dead balancer's fleet lease lapsed", async () => {
    try {
      run = await runBalance({
        tables: TABLES,
        mode: "live",
        sourceConnection: (source) => urls[source.name as "a" | "b" | "e"],
        leaseMs: LEASE_MS,
        ...options,
      });
      return true;
    } catch (error) {
      if (isShardkitError(error, "BALANCE_LEASE_HELD")) return false;
      throw error;
    }
  });
  return run!;
}

/** Acknowledged writes on every shard, then the balancer killed at `step`: the stopped move it left. */
async function stoppedAt(r: ReturnType<typeof make>, step: string) {
  await recordLoad(r.clients.a);
  const db = r.clients.a.$extends(shardRouting({ registry: r.registry, models, load: false }));
  const acked: string[] = [];
  for (let i = 0; i < 30; i++) {
    const id = ShardedId.generate("Bucket", [S.g0m0, S.g0m1, S.g1m0][i % 3]!);
    await db.bucket.create({ data: { id, name: `w${i}`, remaining: i } });
    acked.push(id);
  }
  expect(await killedBalancer(step)).toBe("SIGKILL");
  let shard = "";
  await eventually("the dead balancer's move lease lapsed", async () => {
    const view = await readPartitionMap(r.registry);
    shard = view.stopped[0]?.shard.key ?? "";
    return view.stopped.length === 1 && view.stopped[0]!.database === "a" && view.stopped[0]!.to === "e";
  });
  /** The stopped move undone: none left stopped, the shard owned by a, every acknowledged write there once. */
  const backOnA = async () => {
    const view = await readPartitionMap(r.registry);
    expect([view.stopped, view.issues]).toEqual([[], []]);
    expect(view.shards.find((p) => p.shard.key === shard)!.owner!.name).toBe("a");
    let found = 0;
    for (const name of ["a", "b", "e"] as const)
      found += await r.clients[name].bucket.count({ where: { id: { in: acked } } });
    expect(found).toBe(acked.length);
    return view;
  };
  return { shard, backOnA };
}

describe("a stopped move taken over within the run's limits", () => {
  it(
    "maxMoves, an aborted signal and the p99 guard leave it stopped; a target forbidden now undoes it to its source",
    async () => {
      const r = make();
      const { shard, backOnA } = await stoppedAt(r, "verify");
      const stillStopped = async () => (await readPartitionMap(r.registry)).stopped.map((s) => s.shard.key);

      const none = await balanceAgain({ registry: r.registry, maxMoves: 0 });
      expect([none.ok, none.stoppedBy, none.moves]).toEqual([true, "max-moves", []]);
      expect(none.reason).toMatch(/0 stopped moves taken over \(maxMoves\), 1 left/);
      expect(await stillStopped()).toEqual([shard]);

      const aborted = await balanceAgain({ registry: r.registry, signal: AbortSignal.abort() });
      expect([aborted.stoppedBy, aborted.moves]).toEqual(["interrupted", []]);
      expect(await stillStopped()).toEqual([shard]);

      // The other shards' p99 (2 ms in a window of the last 10 s, recorded now: the guard reads the
      // last minute, however long the runs above took) is above the bound: the run stops.
      await recordLoad(r.clients.a, 0);
      const hot = await balanceAgain({ registry: r.registry, maxP99Ms: 1, maxPauseMs: 1 });
      expect([hot.stoppedBy, hot.moves]).toEqual(["p99", []]);
      expect(hot.reason).toMatch(/p99 .* is above the bound of 1 ms/);
      expect(await stillStopped()).toEqual([shard]);

      // e may not hold group 0 now: the move is undone, not refused at every run.
      const ruled = euOnly(r);
      const run = await balanceAgain({ registry: ruled });
      expect(run.ok, run.reason).toBe(true);
      expect(run.moves[0]).toMatchObject({ kind: "takeover", status: "moved", shard, from: "a", to: "a" });
      expect(run.moves[0]!.undone).toMatch(/group 0 may live only on region=eu; database "e" has region=us/);
      expect(run.moves[0]!.reason).toMatch(
        /undone, .* kept on \(or moved back to\) a, as e may not hold it now/,
      );
      await backOnA();
    },
    patient(120_000),
  );

  it(
    "a switched move whose target is forbidden now is moved back to its source",
    async () => {
      const r = make();
      const { shard, backOnA } = await stoppedAt(r, "teardown");
      const run = await balanceAgain({ registry: euOnly(r) });
      expect(run.ok, run.reason).toBe(true);
      expect(run.moves[0]).toMatchObject({ kind: "takeover", status: "moved", shard, to: "a" });
      expect(run.moves[0]!.undone).toMatch(/may live only on region=eu/);
      await backOnA();
    },
    patient(120_000),
  );

  it(
    "a drain of the stopped move's target undoes the move instead of moving the shard onto it",
    async () => {
      const r = make();
      const { shard, backOnA } = await stoppedAt(r, "verify");
      const e = r.registry.databases.find((d) => d.name === "e")!;
      const run = await balanceAgain({ registry: r.registry, drain: e });
      expect(run.ok, run.reason).toBe(true);
      expect(run.moves).toMatchObject([
        { kind: "takeover", status: "moved", shard, to: "a", undone: "e is being drained" },
      ]);
      const view = await backOnA();
      expect(view.shards.map((p) => p.owner!.name).sort()).toEqual(["a", "a", "b"]);
    },
    patient(120_000),
  );
});
