// A fleet of the size the partition map is for: 16 routers opening their maps over 64 fresh
// databases at the same moment, on a PostgreSQL server of the test's own (room for 16 x 64
// connections). Each router is a registry with a client of its own per database (a pool of one),
// as separate service instances have, in this process.
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { patient, withClient } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fleetRegistry, type MapFleet, mapFleet, shareFleetServer, statementsIn } from "../test/fleet.js";
import { routedClient, TABLES } from "../test/layout.js";
import { moveShard, PartitionMap } from "./index.js";

const DATABASES = 64;
const ROUTERS = 16;
let fleet: MapFleet | undefined;
let releaseServer = async () => {};

beforeAll(async () => {
  releaseServer = await shareFleetServer();
  fleet = await mapFleet(DATABASES, "open");
}, patient(300_000));

afterAll(async () => {
  await fleet?.drop();
  await releaseServer();
}, patient(120_000));

/** The map's version in a database (`shardkit.map_version`: 0 before any change was announced there). */
const VERSION_SQL = `SELECT (CASE WHEN is_called THEN last_value ELSE 0 END)::int AS version FROM shardkit.map_version`;

/**
 * `ROUTERS` routers opening their maps over the fleet at once (with `options`): each one's map, its
 * registry, and what its open set up. The caller closes the maps and disconnects the registries.
 */
async function openAll(options: { sweepIntervalMs?: number } = {}) {
  const routers = Array.from({ length: ROUTERS }, () => ({
    registry: fleetRegistry(fleet!.urls, 4, 1),
    installs: [] as string[],
  }));
  try {
    // A deadline no answer misses on a busy host: what is checked is that every open succeeds with
    // every database answered, not how fast.
    const maps = await Promise.all(
      routers.map((r) =>
        PartitionMap.open({
          registry: r.registry,
          tables: TABLES,
          timeoutMs: patient(120_000),
          ...options,
          onSignal: (s) => {
            if (s.type === "install") r.installs.push(`${s.what} ${s.database}`);
          },
        }),
      ),
    );
    return routers.map((r, i) => ({ ...r, map: maps[i]! }));
  } catch (error) {
    for (const r of routers) await r.registry.disconnect();
    throw error;
  }
}

/** What each router's open found: unanswered databases, problems, its entries, what it set up. */
function opened(routers: Awaited<ReturnType<typeof openAll>>) {
  return routers.map(({ map, installs }) => ({
    unanswered: map.unanswered().size,
    problems: map.problemsOf().length,
    entries: map.entries().map((e) => `${e.shard.key}@${e.database}:${e.epoch}:${e.state}`),
    installs,
  }));
}

/** Closes the routers' maps and connections. */
async function closeAll(routers: Awaited<ReturnType<typeof openAll>>) {
  for (const { map } of routers) map.close();
  for (const { registry } of routers) await registry.disconnect();
}

describe(`${ROUTERS} routers x ${DATABASES} databases`, () => {
  // The second start of the fleet (everything in place) is the idle fleet whose cost is measured:
  // one set of routers opened for both claims.
  it(
    "every router opens its map over fresh databases at once, with every database answered; the set-up is made once per database, by one router, and all agree on the map; opening again sets up nothing; idle, the routers send at most 0.1 statements per router per database per second, and a switch reaches every one of them from its announcement, with no call made",
    async () => {
      const fresh = await openAll();
      const first = opened(fresh);
      await closeAll(fresh);
      for (const router of first)
        expect({ unanswered: router.unanswered, problems: router.problems }).toEqual({
          unanswered: 0,
          problems: 0,
        });
      // Each database got its functions and its records once, whichever router came first.
      expect(first.flatMap((r) => r.installs).sort()).toEqual(
        fleet!.names.flatMap((name) => [`functions ${name}`, `records ${name}`]).sort(),
      );
      for (const router of first) expect(router.entries).toEqual(first[0]!.entries);
      expect(first[0]!.entries.every((e) => e.endsWith(":1:owned"))).toBe(true);
      // The first recording is a change of records like any other: announced in every database, so
      // a router opened before it learns of it from its next tick.
      const versions: number[] = [];
      for (const url of fleet!.urls)
        versions.push(await withClient(url, async (c) => (await c.query(VERSION_SQL)).rows[0].version));
      expect(versions.filter((v) => v === 0)).toEqual([]);
      // An ordinary start of the same fleet: everything is in place, nothing is set up again. Sweeps
      // every 10 min: what these routers learn below, they learn from announcements.
      const idle = await openAll({ sweepIntervalMs: 600_000 });
      try {
        const again = opened(idle);
        expect(again.flatMap((r) => r.installs)).toEqual([]);
        for (const router of again) expect(router.entries).toEqual(first[0]!.entries);
        const maps = idle.map((r) => r.map);
        const routers = idle.map((r) => r.registry);
        // The first tick of each router looks at every database (it has no version yet); then each
        // tick looks at one database, in turn.
        let ticks = 0;
        for (const map of maps) map.start();
        const swept = maps.map((map) => map.counters.refreshes);
        await eventually("every router's first tick is done", async () =>
          maps.every((map, i) => map.counters.refreshes > swept[i]!),
        );
        const before = await statementsIn(fleet!.names);
        const started = performance.now();
        const refreshes = maps.map((map) => map.counters.refreshes);
        await new Promise((resolve) => setTimeout(resolve, 10_000)); // the window measured, not a wait for an event
        const sent = (await statementsIn(fleet!.names)) - before;
        const seconds = (performance.now() - started) / 1000;
        ticks = maps.reduce((n, map, i) => n + map.counters.refreshes - refreshes[i]!, 0);
        expect(ticks).toBeGreaterThan(0);
        expect(sent / ROUTERS / DATABASES / seconds).toBeLessThanOrEqual(0.1);
        // A move made by the first router: every router follows it without any call of its own.
        const shard = ShardIdentifier.of(0, 0);
        const to = routers[0]!.databases[1]!;
        await moveShard({ map: maps[0]!, shard, to, mode: "offline", onProgress: () => {} });
        await eventually("every router routes the shard to its new owner", async () =>
          routers.every((registry) => registry.databaseOf(shard).name === to.name),
        );
      } finally {
        await closeAll(idle);
      }
    },
    patient(900_000),
  );

  it(
    "a router whose announcement of a switch is lost (blocked here) learns of the switch from the former owner's records within 2 s of its next call: no tick, no sweep, no refusal needed",
    async () => {
      const mover = fleetRegistry(fleet!.urls, 4, 1);
      const deaf = fleetRegistry(fleet!.urls, 4, 1);
      // Shard 0/8 lives on the fleet's third database; it moves to the fourth.
      const shard = ShardIdentifier.of(0, 8);
      const from = mover.databases[2]!;
      const to = mover.databases[3]!;
      const moverMap = await PartitionMap.open({
        registry: mover,
        tables: TABLES,
        timeoutMs: patient(120_000),
      });
      // Never started: no tick and no sweep. What it learns, it learns from its calls.
      const deafMap = await PartitionMap.open({
        registry: deaf,
        tables: TABLES,
        timeoutMs: patient(120_000),
      });
      const id = ShardedId.generate("Bucket", shard);
      await routedClient(mover).bucket.create({ data: { id, name: "B-8", remaining: 3 } });
      // Every announcement to the former owner is lost: the map's version there may not move on
      // (its nextval fails at the sequence's maximum), while the map's check still reads it.
      const former = fleet!.urls[2]!;
      const before = await withClient(former, async (c) => (await c.query(VERSION_SQL)).rows[0].version);
      expect(before).toBeGreaterThan(0); // announced before: is_called, so the maximum is the value itself
      await withClient(former, (c) => c.query(`ALTER SEQUENCE shardkit.map_version MAXVALUE ${before}`));
      try {
        // The former owner keeps its copy a while (no cleanup yet): the window a stale read could use.
        await moveShard({ map: moverMap, shard, to, mode: "offline", cleanup: false, onProgress: () => {} });
        expect(mover.databaseOf(shard).name).toBe(to.name);
        // The announcement did not reach the former owner; the router still routes there.
        expect(await withClient(former, async (c) => (await c.query(VERSION_SQL)).rows[0].version)).toBe(
          before,
        );
        expect(deaf.databaseOf(shard).name).toBe(from.name);
        // Its calls: reads, which the former owner answers (its rows were frozen at the switch). A
        // call looks beside it once a second has passed since the router last heard from that
        // database, so it calls until one has (how long the move took decides whether the first does).
        await eventually(
          "the router routes the shard to its new owner",
          async () => {
            const found = await routedClient(deaf).bucket.findUnique({ where: { id } });
            expect(found?.remaining).toBe(3);
            return deaf.databaseOf(shard).name === to.name;
          },
          { timeoutMs: patient(5000) },
        );
        expect(deafMap.entries().find((e) => e.shard.equals(shard))).toMatchObject({
          database: to.name,
          epoch: 2,
        });
        // Learnt from the former owner's records, not from a refusal.
        expect(deafMap.counters.staleRejections).toBe(0);
        expect(await routedClient(deaf).bucket.findUnique({ where: { id } })).toMatchObject({ remaining: 3 });
      } finally {
        await withClient(former, (c) => c.query("ALTER SEQUENCE shardkit.map_version NO MAXVALUE"));
        moverMap.close();
        deafMap.close();
        await mover.disconnect();
        await deaf.disconnect();
      }
    },
    patient(600_000),
  );
});
