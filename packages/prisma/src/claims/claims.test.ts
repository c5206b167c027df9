import { type ChildProcess, spawn } from "node:child_process";
import { PrismaPg } from "@prisma/adapter-pg";
import { murmur3, ShardedUUID, type ShardIdentifier, shardHash } from "@shardkit/id";
import { createDatabase, dropDatabase, MAIN_PORT } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../../test/generated/prisma/client.js";
import { makeWorld, S } from "../../test/world.js";
import { UniqueViolationError } from "../errors.js";
import { shardRouting } from "../extension.js";
import { createShardRegistry } from "../registry.js";
import { rolloutSchema } from "../rollout.js";
import { LOCKS } from "../shared.js";

/** The shard the frozen hash places `value` on among `shards`. */
const hashedTo = (value: string, shards: readonly ShardIdentifier[]) => shardHash(shards)(value);

// Fields unique across shards, on real PostgreSQL: three databases, six logical shards (a: 0/0 0/1,
// b: 0/2 1/0, c: 1/1 1/2). Customer.email is @unique in the schema, which holds per database only;
// the routing declares it unique across shards, enforced by claim rows.

const world = makeWorld();
const { registry, clients } = world;
let placeOn = S.g0m0;
const db = clients.a.$extends(
  shardRouting({
    registry,
    legacy: "0/0",
    models: { Customer: { unique: { email: true }, place: () => placeOn } },
  }),
);
const SHARDS = [S.g0m0, S.g0m1, S.g0m2, S.g1m0, S.g1m1, S.g1m2];
const claimShardOf = (value: string) => hashedTo(`Customer.email\u0000${value}`, SHARDS);
/** A shard on the database after the one that holds `email`'s claim: its row and its claim cross. */
const rowShardOf = (email: string) => {
  const claimDb = registry.databaseOf(claimShardOf(email.toLowerCase())).index;
  return SHARDS.find((shard) => registry.databaseOf(shard).index === (claimDb + 1) % 3)!;
};
const clientOf = (shard: typeof S.g0m0) =>
  [clients.a, clients.b, clients.c][registry.databaseOf(shard).index]!;
const urls = inject("shardUrls");
const urlOf = (shard: typeof S.g0m0) => [urls.a, urls.b, urls.c][registry.databaseOf(shard).index]!;

/** Every claim on every database. */
async function claims() {
  const all = await Promise.all([clients.a, clients.b, clients.c].map((c) => c.uniqueClaim.findMany()));
  return all.flat();
}
/** Every customer with an email, with the shard its id names. */
async function holders() {
  const all = await Promise.all(
    [clients.a, clients.b, clients.c].map((c) => c.customer.findMany({ where: { email: { not: null } } })),
  );
  return all.flat();
}
/** No claim without its row holding the value, no row without its claim. */
async function expectConsistent() {
  const cs = await claims();
  const rows = await holders();
  for (const row of rows) {
    const claim = cs.find((c) => c.value === row.email!.toLowerCase());
    expect(claim, `claim of ${row.email}`).toMatchObject({ ownerId: row.id, state: "held" });
  }
  for (const claim of cs) {
    expect(rows.find((r) => r.id === claim.ownerId && r.email!.toLowerCase() === claim.value)).toBeDefined();
  }
}

/** True when `sql` (a `count(*) AS n`) counts more than zero on `url`. */
async function waiting(url: string, sql: string, params: unknown[]): Promise<boolean> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query(sql, params);
    return Number(rows[0].n) > 0;
  } finally {
    await c.end();
  }
}

/** A customer's data without an id: the router fills one in (test/schema.prisma has no `@default` on the id, so Prisma's types want one). */
const fresh = <T extends object>(data: T) => data as T & { id: string };

beforeEach(() => world.truncate());
afterAll(() => world.close());

describe("fields unique across shards (real PostgreSQL)", () => {
  it("a plain @unique holds per database: the same email on two databases is accepted", async () => {
    await clients.a.customer.create({
      data: { id: ShardedUUID.generate(S.g0m0), name: "x", region: "eu", email: "a@x.com" },
    });
    await clients.b.customer.create({
      data: { id: ShardedUUID.generate(S.g0m2), name: "y", region: "eu", email: "a@x.com" },
    });
    expect(await holders()).toHaveLength(2);
  });

  it("the second user with an email (any case) on another shard is refused; the claim names the first", async () => {
    placeOn = S.g0m1;
    const first = await db.customer.create({
      data: fresh({ name: "ana", region: "eu", email: "Ana@Example.com" }),
    });
    expect(ShardedUUID.shardOf(first.id)).toBe(S.g0m1);
    placeOn = S.g1m2;
    await expect(
      db.customer.create({ data: fresh({ name: "eve", region: "us", email: "ana@EXAMPLE.com" }) }),
    ).rejects.toBeInstanceOf(UniqueViolationError);
    expect(await holders()).toHaveLength(1);
    const [claim] = await claims();
    expect(claim).toMatchObject({
      scope: "Customer.email",
      value: "ana@example.com",
      stored: "Ana@Example.com",
      ownerId: first.id,
      ownerShard: S.g0m1.bits,
      shard: claimShardOf("ana@example.com").bits,
      state: "held",
    });
    // The claim lives on the database of the shard the value hashes to.
    expect(await clientOf(claimShardOf("ana@example.com")).uniqueClaim.count()).toBe(1);
  });

  it("findUnique by email routes through the claim: any case finds the row, on its shard only", async () => {
    placeOn = S.g1m1;
    const user = await db.customer.create({ data: fresh({ name: "bo", region: "eu", email: "bo@x.com" }) });
    world.clear();
    const found = await db.customer.findUnique({ where: { email: "BO@x.com" } });
    expect(found?.id).toBe(user.id);
    const customerDbs = world.landed("Customer");
    expect(customerDbs).toEqual(["c"]);
    expect(await db.customer.findUnique({ where: { email: "nobody@x.com" } })).toBeNull();
    // update and delete by email reach the same row, with the rest of their arguments.
    const renamed = await db.customer.update({
      where: { email: "Bo@X.com" },
      data: { name: "Bo" },
      select: { name: true },
    });
    expect(renamed).toEqual({ name: "Bo" });
    await db.customer.delete({ where: { email: "bo@x.COM" } });
    expect(await clients.c.customer.count()).toBe(0);
  });

  it("an update to another email frees the old one; the old one is then taken by someone else", async () => {
    placeOn = S.g0m2;
    const bo = await db.customer.create({ data: fresh({ name: "bo", region: "eu", email: "old@x.com" }) });
    await db.customer.update({ where: { id: bo.id }, data: { email: "new@x.com" } });
    expect(await db.customer.findUnique({ where: { email: "old@x.com" } })).toBeNull();
    expect((await db.customer.findUnique({ where: { email: "new@x.com" } }))?.id).toBe(bo.id);
    placeOn = S.g1m1;
    const cy = await db.customer.create({ data: fresh({ name: "cy", region: "us", email: "old@x.com" }) });
    expect((await db.customer.findUnique({ where: { email: "old@x.com" } }))?.id).toBe(cy.id);
    // Taking a value held by a live row is refused even by update.
    await expect(
      db.customer.update({ where: { id: cy.id }, data: { email: "NEW@x.com" } }),
    ).rejects.toBeInstanceOf(UniqueViolationError);
  });

  it("a deleted row's email can be taken again", async () => {
    placeOn = S.g0m0;
    const gone = await db.customer.create({ data: fresh({ name: "g", region: "eu", email: "g@x.com" }) });
    await db.customer.delete({ where: { id: gone.id } });
    placeOn = S.g1m2;
    const next = await db.customer.create({ data: fresh({ name: "h", region: "eu", email: "g@x.com" }) });
    expect((await db.customer.findUnique({ where: { email: "g@x.com" } }))?.id).toBe(next.id);
    await expectConsistent();
  });

  it("twelve concurrent sign-ups with one email on six shards: exactly one wins", async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) =>
        db.$transactionOn(SHARDS[i % 6]!, (tx) =>
          tx.customer.create({ data: fresh({ name: `n${i}`, region: "eu", email: "race@x.com" }) }),
        ),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results) {
      if (r.status === "rejected") expect(r.reason).toBeInstanceOf(UniqueViolationError);
    }
    expect(await holders()).toHaveLength(1);
    await db.$repairClaims({ olderThanMs: 0 });
    await expectConsistent();
  });

  it("in a caller's REPEATABLE READ transaction, the check sees the claim taken after its snapshot", async () => {
    const email = "snapshot@x.com";
    const shard = claimShardOf(email); // the claim lives on the row's own database
    placeOn = shard;
    const created = await db.$transactionOn(
      shard,
      async (tx) => {
        await tx.customer.count(); // the snapshot: from before the claim is taken
        return tx.customer.create({ data: fresh({ name: "s", region: "eu", email }) });
      },
      { isolationLevel: "RepeatableRead" },
    );
    expect((await db.customer.findUnique({ where: { email } }))?.id).toBe(created.id);
    await db.$repairClaims({ olderThanMs: 0 });
    await expectConsistent();
  });

  it("a failed row write leaves no claim behind", async () => {
    placeOn = S.g0m0;
    const taken = ShardedUUID.generate(S.g0m0);
    await db.customer.create({ data: { id: taken, name: "a", region: "eu", email: "first@x.com" } });
    // The same id again: the row's insert fails (primary key), so its new claim is settled away.
    await expect(
      db.customer.create({ data: { id: taken, name: "b", region: "eu", email: "second@x.com" } }),
    ).rejects.toThrow();
    expect((await claims()).map((c) => c.value)).toEqual(["first@x.com"]);
  });

  it("a transaction that rolls back leaves a void claim that the next sign-up takes over", async () => {
    await db
      .$transactionOn(S.g0m1, async (tx) => {
        await tx.customer.create({ data: fresh({ name: "a", region: "eu", email: "tx@x.com" }) });
        throw new Error("rolled back");
      })
      .catch(() => {});
    expect((await claims()).map((c) => c.state)).toEqual(["pending"]);
    placeOn = S.g1m0;
    const b = await db.customer.create({ data: fresh({ name: "b", region: "eu", email: "tx@x.com" }) });
    expect((await db.customer.findUnique({ where: { email: "tx@x.com" } }))?.id).toBe(b.id);
    await expectConsistent();
  });

  it("a claim passed to another write of its own row voids the token it had, so a write still holding that token is refused", async () => {
    placeOn = S.g1m0;
    const row = await db.customer.create({ data: fresh({ name: "r", region: "eu", email: "same@x.com" }) });
    const [before] = await claims();
    // The row set to its own value again (a retry): the claim gets the new write's token.
    await db.customer.update({ where: { id: row.id }, data: { email: "SAME@x.com" } });
    const [after] = await claims();
    expect(after).toMatchObject({ ownerId: row.id, stored: "SAME@x.com", state: "held" });
    expect(after!.token).not.toBe(before!.token);
    const rowDb = clientOf(S.g1m0);
    expect(await rowDb.uniqueClaimToken.findUnique({ where: { token: before!.token } })).toMatchObject({
      void: true,
      shard: S.g1m0.bits,
    });
    expect(await rowDb.uniqueClaimToken.findUnique({ where: { token: after!.token } })).toMatchObject({
      void: false,
    });
    await expectConsistent();
  });

  it('claims written before tokens (token "") are taken over and released without a token mark', async () => {
    const gone = ShardedUUID.generate(S.g0m2);
    const claimDb = clientOf(claimShardOf("legacy@x.com"));
    await claimDb.$executeRawUnsafe(
      `INSERT INTO "UniqueClaim" ("shard", "scope", "value", "stored", "ownerShard", "ownerId", "state") VALUES ($1, 'Customer.email', 'legacy@x.com', 'legacy@x.com', $2, $3, 'held')`,
      claimShardOf("legacy@x.com").bits,
      S.g0m2.bits,
      gone,
    );
    placeOn = S.g1m1;
    const taker = await db.customer.create({
      data: fresh({ name: "t", region: "eu", email: "legacy@x.com" }),
    });
    expect((await db.customer.findUnique({ where: { email: "legacy@x.com" } }))?.id).toBe(taker.id);
    const tokens = await Promise.all(
      [clients.a, clients.b, clients.c].map((c) => c.uniqueClaimToken.findMany()),
    );
    expect(tokens.flat().filter((t) => t.token === "")).toEqual([]);
    await expectConsistent();
  });

  it("backfill claims existing rows (legacy v4 IDs included) and reports values two rows share", async () => {
    const legacy = [
      "3b241101-e2bb-4255-8caf-4136c566a962",
      "5e0c1bd6-6a2b-4a0e-9c59-1d1a43b0e7a1",
      "7d9a4c2e-0b1f-4e8a-9d3c-2f6b8a1e5c40",
    ];
    await clients.a.customer.create({
      data: { id: legacy[0]!, name: "old", region: "eu", email: "Old@x.com" },
    });
    await clients.a.customer.create({
      data: { id: legacy[1]!, name: "dup", region: "eu", email: "OLD@x.com" },
    });
    await clients.a.customer.create({
      data: { id: legacy[2]!, name: "dup2", region: "eu", email: "old@X.com" },
    });
    await clients.c.customer.create({
      data: { id: ShardedUUID.generate(S.g1m1), name: "c", region: "eu", email: "c@x.com" },
    });
    const progress: number[] = [];
    const report = await db.$backfillClaims("customer", {
      batchSize: 1,
      onProgress: (p) => progress.push(p.rows),
    });
    expect(report.rows).toBe(4);
    expect(report.claimed).toBe(2);
    // The first row read (ids in order) holds the value; every other row with it is named, to change.
    expect(report.conflicts).toEqual([
      { scope: "Customer.email", value: "old@x.com", heldBy: legacy[0], others: [legacy[1], legacy[2]] },
    ]);
    expect(progress.at(-1)).toBe(4);
    const again = await db.$backfillClaims("customer");
    expect(again.claimed).toBe(2);
    expect((await claims()).length).toBe(2);
    // The legacy row is found by email on the legacy shard.
    const found = await db.customer.findUnique({ where: { email: "old@x.com" } });
    expect(found?.id).toBe(legacy[0]); // the row holding the claim
    expect((await db.customer.findUnique({ where: { email: "c@x.com" } }))?.name).toBe("c");
  });

  it("backfill after a release that placed claims elsewhere: each claim ends where its value's hash puts it, under that shard, and uniqueness holds", async () => {
    // Two rows with claims where this release puts them; then each claim is put back where another
    // hash could have: one on another database, one on the same database under its other shard.
    const emails = Array.from({ length: 40 }, (_, i) => `moved-${i}@x.com`);
    const elsewhere = emails.find((e) => registry.databaseOf(claimShardOf(e)).index !== 2)!;
    const relabelled = emails.find((e) => e !== elsewhere)!;
    const rows = [];
    for (const email of [elsewhere, relabelled])
      rows.push(await db.customer.create({ data: fresh({ name: email, region: "eu", email }) }));
    const databaseOf = (email: string) => clientOf(claimShardOf(email));
    const [claim] = await databaseOf(elsewhere).uniqueClaim.findMany({ where: { value: elsewhere } });
    await databaseOf(elsewhere).uniqueClaim.deleteMany({ where: { value: elsewhere } });
    await clients.c.uniqueClaim.create({ data: { ...claim!, shard: S.g1m1.bits } });
    const sameDatabase = (shard: typeof S.g0m0) =>
      SHARDS.find((s) => s !== shard && registry.databaseOf(s) === registry.databaseOf(shard))!;
    await databaseOf(relabelled).uniqueClaim.updateMany({
      where: { value: relabelled },
      data: { shard: sameDatabase(claimShardOf(relabelled)).bits },
    });

    const report = await db.$backfillClaims("customer");
    expect(report).toMatchObject({ rows: 2, claimed: 2, conflicts: [], misplaced: 1 });
    for (const email of [elsewhere, relabelled]) {
      const found = (await claims()).filter((c) => c.value === email);
      expect(
        found.map((c) => c.shard),
        email,
      ).toEqual([claimShardOf(email).bits]);
      expect(await databaseOf(email).uniqueClaim.count({ where: { value: email } })).toBe(1);
      expect((await db.customer.findUnique({ where: { email } }))?.id).toBe(
        rows.find((r) => r.email === email)!.id,
      );
    }
    await expectConsistent();
    await expect(
      db.customer.create({ data: fresh({ name: "dup", region: "eu", email: elsewhere }) }),
    ).rejects.toBeInstanceOf(UniqueViolationError);
    // A second run finds nothing misplaced.
    expect((await db.$backfillClaims("customer")).misplaced).toBe(0);
  });
});

describe("claims and rows on crossing databases, pools of two connections", () => {
  // Each email's claim lives on one database and its rows on another, both ways round: a step that
  // held a lock or a transaction on one database while it waited for a connection of another pool
  // would starve the pools, and every write would fail with Prisma's P2028 instead of one winning.
  const [small, smallRegistry] = (() => {
    const pooled = [urls.a, urls.b, urls.c].map(
      (url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 2 }) }),
    );
    const crossing = createShardRegistry({
      shards: SHARDS.map((shard) => ({ shard, client: pooled[registry.databaseOf(shard).index]! })),
    });
    const routed = pooled[0]!.$extends(
      shardRouting({
        registry: crossing,
        models: { Customer: { unique: { email: true }, place: (data) => rowShardOf(String(data.email)) } },
      }),
    );
    return [routed, crossing] as const;
  })();
  afterAll(() => smallRegistry.disconnect());

  it("three rounds of 20 emails, each taken at once by two sign-ups and an update: one winner each, every loser UniqueViolationError, no claim left pending", async () => {
    for (let round = 0; round < 3; round++) {
      const emails = Array.from({ length: 20 }, (_, i) => `cross-${round}-${i}@x.com`);
      // For each email, a customer without one on a database its claim is not on: the update sets it.
      const existing = await Promise.all(
        emails.map((email) =>
          small.customer.create({
            data: fresh({ name: "existing", region: "eu", id: ShardedUUID.generate(rowShardOf(email)) }),
          }),
        ),
      );
      const outcomes = await Promise.all(
        emails.flatMap((email, i) =>
          [
            small.customer.create({ data: fresh({ name: "first", region: "eu", email }) }),
            small.customer.update({ where: { id: existing[i]!.id }, data: { email: email.toUpperCase() } }),
            small.customer.create({ data: fresh({ name: "second", region: "eu", email }) }),
          ].map((write) =>
            write.then(
              (row) => ({ email, won: row.id }),
              (error: unknown) => ({ email, error }),
            ),
          ),
        ),
      );
      const wrong = outcomes.filter((o) => "error" in o && !(o.error instanceof UniqueViolationError));
      expect(wrong.map((o) => String((o as { error: unknown }).error))).toEqual([]);
      for (const email of emails) {
        const won = outcomes.filter((o) => o.email === email && "won" in o);
        expect(won, email).toHaveLength(1);
        expect((await small.customer.findUnique({ where: { email } }))?.id).toBe(
          (won[0] as { won: string }).won,
        );
      }
    }
    expect((await claims()).filter((c) => c.state !== "held")).toEqual([]);
    expect(await holders()).toHaveLength(60);
    await expectConsistent();
  });

  it("upsert by email, the login pattern: ten at once in any case make one row, found by nine updates", async () => {
    const email = "login@x.com";
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        small.customer.upsert({
          where: { email: i % 2 ? email : email.toUpperCase() },
          create: fresh({ name: "created", region: "eu", email: i % 3 ? email : "Login@X.com" }),
          update: { name: `seen-${i}` },
        }),
      ),
    );
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
    expect(results.filter((r) => r.name === "created")).toHaveLength(1);
    const [row] = await holders();
    expect(row).toMatchObject({ id: results[0]!.id });
    expect(registry.databaseOf(ShardedUUID.shardOf(row!.id)).index).not.toBe(
      registry.databaseOf(claimShardOf(email)).index,
    );
    expect((await claims()).map((c) => [c.value, c.ownerId, c.state])).toEqual([[email, row!.id, "held"]]);
    await expectConsistent();
  });

  it("an upsert of a row that does not exist creates it, even when its update half would set a taken email", async () => {
    await small.customer.create({ data: fresh({ name: "ana", region: "eu", email: "held@x.com" }) });
    const id = ShardedUUID.generate(S.g1m1);
    const made = await small.customer.upsert({
      where: { id },
      create: { id, name: "new", region: "eu", email: "free@x.com" },
      update: { email: "HELD@x.com" },
    });
    expect(made).toMatchObject({ id, email: "free@x.com" });
    await expectConsistent();
  });

  it("an upsert whose create or update would set a taken email is refused with UniqueViolationError", async () => {
    const ana = await small.customer.create({
      data: fresh({ name: "ana", region: "eu", email: "ana@x.com" }),
    });
    const bo = await small.customer.create({ data: fresh({ name: "bo", region: "eu", email: "bo@x.com" }) });
    await expect(
      small.customer.upsert({
        where: { id: ShardedUUID.generate(S.g1m0) },
        create: fresh({ name: "cy", region: "eu", email: "ANA@x.com" }),
        update: {},
      }),
    ).rejects.toBeInstanceOf(UniqueViolationError);
    await expect(
      small.customer.upsert({
        where: { email: "bo@x.com" },
        create: fresh({ name: "bo2", region: "eu", email: "bo@x.com" }),
        update: { email: "Ana@x.com" },
      }),
    ).rejects.toBeInstanceOf(UniqueViolationError);
    expect((await holders()).map((r) => [r.id, r.email]).sort()).toEqual(
      [
        [ana.id, "ana@x.com"],
        [bo.id, "bo@x.com"],
      ].sort(),
    );
    await expectConsistent();
  });
});

describe("claims after a crash (a process SIGKILLed mid-saga)", () => {
  const layout = () => ({
    urls: [urls.a, urls.b, urls.c],
    shards: [
      ["0/0", "0/1"],
      ["0/2", "1/0"],
      ["1/1", "1/2"],
    ],
  });

  function startChild(email: string, shard: string): { child: ChildProcess; exited: Promise<unknown> } {
    const child = spawn("pnpm", ["exec", "tsx", "test/claim-child.ts"], {
      cwd: new URL("../..", import.meta.url).pathname,
      env: { ...process.env, CLAIM_CHILD: JSON.stringify({ ...layout(), email, shard }) },
      stdio: ["ignore", "pipe", "inherit"],
      detached: true,
    });
    const exited = new Promise((resolve) => child.on("exit", resolve));
    return { child, exited };
  }

  it("killed after its claim, before its row: the claim is void, repaired away, and the email free", async () => {
    const email = "crash1@x.com";
    const owner = S.g0m2;
    const key = murmur3(`Customer.email\u0000${email}`);
    // Hold the value's advisory lock on the row's database: the child stops at the row step.
    const blocker = new pg.Client({ connectionString: urlOf(owner) });
    await blocker.connect();
    await blocker.query("BEGIN");
    await blocker.query(`SELECT pg_advisory_xact_lock(${LOCKS.claims}, $1::int)`, [key | 0]);
    const { child, exited } = startChild(email, owner.key);
    await eventually("the child to wait at the row step", () =>
      waiting(
        urlOf(owner),
        `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = ${LOCKS.claims} AND objid = $1::bigint::oid`,
        [key],
      ),
    );
    process.kill(-child.pid!, "SIGKILL");
    await exited;
    await blocker.query("ROLLBACK");
    await blocker.end();
    expect((await claims()).map((c) => c.state)).toEqual(["pending"]);
    expect(await holders()).toHaveLength(0);
    expect(await db.$repairClaims({ olderThanMs: 0 })).toMatchObject({ held: 0, released: 1 });
    expect(await claims()).toHaveLength(0);
    placeOn = S.g1m1;
    await db.customer.create({ data: fresh({ name: "next", region: "eu", email }) });
    await expectConsistent();
  });

  it("killed after its row committed, before the claim was marked held: repair holds it", async () => {
    const email = "crash2@x.com";
    const owner = S.g1m1;
    const key = murmur3(`Customer.email\u0000${email}`);
    const claimDb = urlOf(claimShardOf(email));
    const advisory = new pg.Client({ connectionString: urlOf(owner) });
    const rowLock = new pg.Client({ connectionString: claimDb });
    await advisory.connect();
    await rowLock.connect();
    await advisory.query("BEGIN");
    await advisory.query(`SELECT pg_advisory_xact_lock(${LOCKS.claims}, $1::int)`, [key | 0]);
    const { child, exited } = startChild(email, owner.key);
    await eventually("the claim", () =>
      waiting(claimDb, `SELECT count(*) AS n FROM "UniqueClaim" WHERE "value" = $1`, [email]),
    );
    // Lock the claim row (the child's final "held" update waits on it), then let the row step go.
    await rowLock.query("BEGIN");
    await rowLock.query(`SELECT 1 FROM "UniqueClaim" WHERE "value" = $1 FOR UPDATE`, [email]);
    await advisory.query("COMMIT");
    await eventually("the child's row", () =>
      waiting(urlOf(owner), `SELECT count(*) AS n FROM "Customer" WHERE "email" = $1`, [email]),
    );
    await eventually("the child to wait at the held update", () =>
      waiting(
        claimDb,
        "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted",
        [],
      ),
    );
    process.kill(-child.pid!, "SIGKILL");
    await exited;
    // A backend blocked on a lock finishes its statement even after its client died: end the dead
    // process's connection as the crash of its host would, before the lock is released.
    await rowLock.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE "UniqueClaim"%'`,
    );
    await rowLock.query("ROLLBACK");
    await Promise.all([advisory.end(), rowLock.end()]);
    expect((await claims()).map((c) => c.state)).toEqual(["pending"]);
    expect(await db.$repairClaims({ olderThanMs: 0 })).toMatchObject({ held: 1, released: 0 });
    await expectConsistent();
    placeOn = S.g0m0;
    await expect(
      db.customer.create({ data: fresh({ name: "late", region: "eu", email }) }),
    ).rejects.toBeInstanceOf(UniqueViolationError);
  });
});

// One database holding two logical shards, for the settings below: a claim and its row share it.
const TWO = [S.g0m0, S.g0m1];
function onOneDatabase(client: PrismaClient, place: () => typeof S.g0m0) {
  return client.$extends(
    shardRouting({
      registry: createShardRegistry({ shards: TWO.map((shard) => ({ shard, client })) }),
      models: { Customer: { unique: { email: true }, place } },
    }),
  );
}
/** The claim a write leaves at step 1 (pending, naming its row) for an email, on `onOneDatabase`. */
function pendingClaim(client: PrismaClient, value: string, row: { id: string; shard: typeof S.g0m0 }) {
  return client.$executeRawUnsafe(
    `INSERT INTO "UniqueClaim" ("shard", "scope", "value", "stored", "ownerShard", "ownerId", "state") VALUES ($1, 'Customer.email', $2, $2, $3, $4, 'pending')`,
    hashedTo(`Customer.email\u0000${value}`, TWO).bits,
    value,
    row.shard.bits,
    row.id,
  );
}

describe("on a pool of one connection (a serverless setting)", () => {
  // Two logical shards on one database whose pool has a single connection: the claim and the row
  // always share a database, and the lock holder must never wait for a second connection.
  const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: urls.a, max: 1 }) });
  let next = 0;
  const small = onOneDatabase(client, () => TWO[next++ % 2]!);
  afterAll(() => client.$disconnect());

  it("sign-ups, a refused duplicate and the takeover of a void claim all finish", async () => {
    const ana = await small.customer.create({
      data: fresh({ name: "ana", region: "eu", email: "one@x.com" }),
    });
    await expect(
      small.customer.create({ data: fresh({ name: "bo", region: "eu", email: "ONE@x.com" }) }),
    ).rejects.toBeInstanceOf(UniqueViolationError);
    // A claim left pending by a write that died before its row: the next sign-up takes it over.
    const value = "void@x.com";
    await pendingClaim(client, value, { id: ShardedUUID.generate(S.g0m1), shard: S.g0m1 });
    const cy = await small.customer.create({ data: fresh({ name: "cy", region: "eu", email: value }) });
    expect((await small.customer.findUnique({ where: { email: value } }))?.id).toBe(cy.id);
    expect((await small.customer.findUnique({ where: { email: "one@x.com" } }))?.id).toBe(ana.id);
    expect(await client.uniqueClaim.findMany({ orderBy: { value: "asc" } })).toMatchObject([
      { value: "one@x.com", ownerId: ana.id, state: "held" },
      { value, ownerId: cy.id, state: "held" },
    ]);
  });
});

describe("on a database whose default isolation is REPEATABLE READ", () => {
  // A claim is judged void only after its row's writer let go of the value's lock; a snapshot taken
  // before the lock was granted would miss the row it committed and give its value to a second row.
  const name = `sk_claims_rr_${process.pid}`;
  let url = "";
  let client: PrismaClient;

  beforeAll(async () => {
    url = await createDatabase(MAIN_PORT, name);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`ALTER DATABASE "${name}" SET default_transaction_isolation = 'repeatable read'`);
    await admin.end();
    await rolloutSchema({
      schema: new URL("../../test/schema.prisma", import.meta.url).pathname,
      targets: [{ name, adapter: new PrismaPg({ connectionString: url }) }],
      onProgress: () => {},
    });
    client = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
  });
  afterAll(async () => {
    await client?.$disconnect();
    await dropDatabase(MAIN_PORT, name);
  });

  it("a claimant waiting on a writer's lock sees the row it committed, and is refused", async () => {
    const small = onOneDatabase(client, () => S.g0m0);
    const value = "rr@x.com";
    const writer = { id: ShardedUUID.generate(S.g0m1), shard: S.g0m1 };
    // A writer at step 2: its claim is taken, it holds the value's lock and is writing its row.
    await pendingClaim(client, value, writer);
    const lock = new pg.Client({ connectionString: url });
    await lock.connect();
    await lock.query("BEGIN");
    await lock.query(`SELECT pg_advisory_xact_lock(${LOCKS.claims}, $1::int)`, [
      murmur3(`Customer.email\u0000${value}`) | 0,
    ]);
    const second = small.customer
      .create({ data: fresh({ name: "second", region: "eu", email: value }) })
      .then(
        () => "created",
        (error: unknown) => error,
      );
    await eventually("the second claimant to wait for the writer's lock", () =>
      waiting(
        url,
        `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = ${LOCKS.claims}`,
        [],
      ),
    );
    await lock.query(
      `INSERT INTO "Customer" ("id", "name", "region", "email") VALUES ($1, 'writer', 'eu', $2)`,
      [writer.id, value],
    );
    await lock.query("COMMIT");
    await lock.end();
    expect(await second).toBeInstanceOf(UniqueViolationError);
    expect((await client.customer.findMany({ where: { email: value } })).map((c) => c.id)).toEqual([
      writer.id,
    ]);
    expect(await client.uniqueClaim.findMany()).toMatchObject([{ value, ownerId: writer.id, state: "held" }]);
  });

  it("twelve sign-ups with one email at once: one wins, every other is UniqueViolationError (no serialization error)", async () => {
    let next = 0;
    const small = onOneDatabase(client, () => TWO[next++ % 2]!);
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) =>
        small.customer.create({ data: fresh({ name: `n${i}`, region: "eu", email: "rr-race@x.com" }) }),
      ),
    );
    const wrong = results.flatMap((r) =>
      r.status === "rejected" && !(r.reason instanceof UniqueViolationError) ? [String(r.reason)] : [],
    );
    expect(wrong).toEqual([]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(await client.uniqueClaim.findMany({ where: { value: "rr-race@x.com" } })).toMatchObject([
      { state: "held" },
    ]);
  });
});
