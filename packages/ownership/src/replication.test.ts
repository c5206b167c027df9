import { ShardIdentifier } from "@shardkit/id";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { reset, routers } from "../test/world.js";
import { DatabasesUnansweredError } from "./errors.js";
import { copied, subscribe, teardown } from "./replication.js";

// Two servers with wal_level = logical (the global setup makes them): a is the source, e the target.
const urls = inject("moveUrls");
const make = routers(urls);
beforeEach(() => reset(urls));

const opened: pg.Client[] = [];
afterEach(async () => {
  for (const client of opened.splice(0)) await client.end().catch(() => {});
});

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {}); // a backend a test cancels or terminates
  await client.connect();
  opened.push(client);
  return client;
}

const names = async (client: pg.Client, sql: string) =>
  (await client.query<{ name: string }>(sql)).rows.map((r) => r.name).sort();

describe("teardown of a move's replication", () => {
  it("cancels its own shard's CREATE SUBSCRIPTION still running, never another shard's whose name starts the same; drops its publication only once the target holds none", async () => {
    const r = make();
    const one = ShardIdentifier.fromBits(1); // shardkit_move_1_…
    const ten = ShardIdentifier.fromBits(10); // shardkit_move_10_…: its name starts like shard 1's
    const mine = `shardkit_move_${one.bits}_aaaaaaaaaaaa`;
    const other = `shardkit_move_${ten.bits}_bbbbbbbbbbbb`;
    const a = await connect(urls.a);
    const e = await connect(urls.e);
    for (const name of [mine, other]) await a.query(`CREATE PUBLICATION "${name}" FOR TABLE "Bucket"`);
    // A transaction holding an xid at the source: creating a logical slot waits for it to end, so
    // both CREATE SUBSCRIPTIONs at the target hang, as one a mover froze in would.
    const blocker = await connect(urls.a);
    await blocker.query("BEGIN");
    await blocker.query("SELECT txid_current()");
    const creating = [mine, other].map(async (name) => {
      const c = await connect(urls.e);
      return c
        .query(`CREATE SUBSCRIPTION "${name}" CONNECTION '${urls.a}' PUBLICATION "${name}"`)
        .then(() => "created" as const)
        .catch((error: Error) => error.message);
    });
    const running = () =>
      names(
        e,
        `SELECT substring(query from 'shardkit_move_[0-9a-z_]+') AS name FROM pg_stat_activity
         WHERE query LIKE 'CREATE SUBSCRIPTION%' AND state <> 'idle'`,
      );
    await eventually("both CREATE SUBSCRIPTIONs run at e", async () => (await running()).length === 2);
    // ...and each has reached the source: its slot exists there, its sender waiting for the blocker
    // (before that, a cancel at e would leave nothing at a for the teardown to find).
    await eventually("both slots are being created at a", async () => {
      const slots = await names(a, "SELECT slot_name AS name FROM pg_replication_slots");
      return slots.includes(mine) && slots.includes(other);
    });

    // The source's slot of shard 1 is still being created (its sender waits for the blocker):
    // teardown says so, and leaves shard 10 alone.
    const first = await teardown(r.databases.a, r.databases.e, one, 5_000).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(await running()).toEqual([other]);
    expect(await creating[0]).toMatch(/cancel/i);
    expect(await names(a, "SELECT pubname AS name FROM pg_publication")).toEqual([other]);
    expect(first).toBeInstanceOf(DatabasesUnansweredError);
    expect((first as DatabasesUnansweredError).databases).toEqual([
      { database: r.databases.a.name, error: expect.stringContaining(`slot ${mine}`) },
    ]);

    await blocker.query("COMMIT");
    expect(await creating[1]).toBe("created");
    // Once the source's sender is done, a second teardown removes what the first could not.
    await eventually("shard 1's teardown finishes", () =>
      teardown(r.databases.a, r.databases.e, one, 5_000).then(
        () => true,
        () => false,
      ),
    );
    const slots = await names(a, "SELECT slot_name AS name FROM pg_replication_slots");
    expect(slots.filter((s) => s.startsWith(mine))).toEqual([]);
    expect(slots).toContain(other);
    expect(await names(e, "SELECT subname AS name FROM pg_subscription")).toEqual([other]);

    await teardown(r.databases.a, r.databases.e, ten, 5_000);
    expect(await names(a, "SELECT slot_name AS name FROM pg_replication_slots")).toEqual([]);
    expect(await names(a, "SELECT pubname AS name FROM pg_publication")).toEqual([]);
    expect(await names(e, "SELECT subname AS name FROM pg_subscription")).toEqual([]);
  });

  it("drops a subscription whose slot is gone from the source (an earlier teardown dropped it while the target did not answer), and leaves nothing", async () => {
    const r = make();
    const one = ShardIdentifier.fromBits(1);
    const mine = `shardkit_move_${one.bits}_cccccccccccc`;
    const a = await connect(urls.a);
    const e = await connect(urls.e);
    await a.query(`CREATE PUBLICATION "${mine}" FOR TABLE "Bucket"`);
    await subscribe(r.databases.a, r.databases.e, mine, urls.a, mine);
    await eventually("the initial copy is done", () => copied(r.databases.e, mine));
    // What a teardown at a did while e was frozen: the sender exited (here: the subscription is
    // disabled), and the slot, inactive, was dropped. e, back, still holds its subscription, enabled.
    await e.query(`ALTER SUBSCRIPTION "${mine}" DISABLE`);
    await eventually(
      "the slot is inactive at a",
      async () =>
        (await a.query("SELECT FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", [mine]))
          .rowCount === 1,
    );
    await a.query("SELECT pg_drop_replication_slot($1)", [mine]);
    await e.query(`ALTER SUBSCRIPTION "${mine}" ENABLE`);

    await teardown(r.databases.a, r.databases.e, one, 5_000);
    expect(await names(e, "SELECT subname AS name FROM pg_subscription")).toEqual([]);
    expect(await names(a, "SELECT slot_name AS name FROM pg_replication_slots")).toEqual([]);
    expect(await names(a, "SELECT pubname AS name FROM pg_publication")).toEqual([]);
    // A second teardown finds nothing left and says nothing.
    await teardown(r.databases.a, r.databases.e, one, 5_000);
  });
});
