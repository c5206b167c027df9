// A fleet of the size the partition map is for: 16 routers opening their maps over 64 fresh
// databases at the same moment, on a PostgreSQL server of the test's own (room for 16 x 64
// connections). Each router is a registry with a client of its own per database (a pool of one),
// as separate service instances have, in this process.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropFleetServer, fleetRegistry, fleetServer, type MapFleet, mapFleet } from "../test/fleet.js";
import { TABLES } from "../test/layout.js";
import { PartitionMap } from "./index.js";

const DATABASES = 64;
const ROUTERS = 16;
let fleet: MapFleet | undefined;

beforeAll(async () => {
  await fleetServer();
  fleet = await mapFleet(DATABASES, "open");
}, 300_000);

afterAll(async () => {
  await fleet?.drop();
  await dropFleetServer();
}, 120_000);

/** `ROUTERS` routers opening their maps over the fleet at once: what each set up, and its map. */
async function openAll() {
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
          timeoutMs: 120_000,
          onSignal: (s) => {
            if (s.type === "install") r.installs.push(`${s.what} ${s.database}`);
          },
        }),
      ),
    );
    const opened = maps.map((map, i) => ({
      unanswered: map.unanswered().size,
      problems: map.problemsOf().length,
      entries: map.entries().map((e) => `${e.shard.key}@${e.database}:${e.epoch}:${e.state}`),
      installs: routers[i]!.installs,
    }));
    for (const map of maps) map.close();
    return opened;
  } finally {
    for (const r of routers) await r.registry.disconnect();
  }
}

describe(`${ROUTERS} routers x ${DATABASES} databases`, () => {
  it("every router opens its map over fresh databases at once, with every database answered; the set-up is made once per database, by one router, and all agree on the map; opening again sets up nothing", async () => {
    const first = await openAll();
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
    // An ordinary start of the same fleet: everything is in place, nothing is set up again.
    const again = await openAll();
    expect(again.flatMap((r) => r.installs)).toEqual([]);
    for (const router of again) expect(router.entries).toEqual(first[0]!.entries);
  }, 600_000);
});
