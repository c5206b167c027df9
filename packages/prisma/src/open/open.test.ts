import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import { ShardedId, ShardIdentifier } from "@shardkit/id";
import {
  createDatabase,
  dropDatabase,
  MAIN_PORT,
  patient,
  withClusterFrozen,
  withClusterStopped,
  within,
} from "@shardkit/test-db";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { PrismaClient } from "../../test/generated/prisma/client.js";
import { ConnectionBudgetError, RegistryConfigError } from "../errors.js";
import type { DatabaseStatus } from "../health.js";
import type { RolloutEvent } from "../rollout.js";
import { isShardUnavailable } from "../unavailable.js";
import { type OpenShards, openShards } from "./open.js";
import { embeddedPackage } from "./open-embedded.js";

/** The second server, which these tests stop or freeze: this run's own (test/global-setup.ts). */
const SECOND = inject("second");

const schema = new URL("../../test/schema.prisma", import.meta.url).pathname;
const shards = [ShardIdentifier.of(0, 0), ShardIdentifier.of(1, 0)];

/** A `createClient` for opens that must fail before anything connects. */
const neverCalled = () => {
  throw new Error("must not be called");
};

/** Runs `statement` on the database at `url` by a connection of its own; the rows. */
async function query(url: string, statement: string) {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    return (await admin.query(statement)).rows;
  } finally {
    await admin.end();
  }
}

/** How many tables the database at `url` holds in its public schema: 0 where no schema reached it. */
const publicTables = async (url: string): Promise<number> =>
  (await query(url, "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'"))[0].n;

/**
 * Two new databases, 0/0 on the main server and 1/0 on the second one (`away`: the test stops or
 * freezes that server): their `shardsJson`, and `drop()` for both.
 */
async function upAndAway(tag: string) {
  const names = { up: `sk_open_${tag}_up_${process.pid}`, away: `sk_open_${tag}_away_${process.pid}` };
  const up = await createDatabase(MAIN_PORT, names.up);
  const away = await createDatabase(SECOND.port, names.away);
  return {
    shardsJson: JSON.stringify([
      { group: 0, member: 0, url: up },
      { group: 1, member: 0, url: away },
    ]),
    async drop() {
      await dropDatabase(MAIN_PORT, names.up);
      await dropDatabase(SECOND.port, names.away);
    },
  };
}

describe("openShards", () => {
  it(
    "embedded: one PGlite database per shard, schema pushed, data kept across reopening",
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), "sk-open-"));
      const events: RolloutEvent[] = [];
      const open = () =>
        openShards({
          schema,
          createClient: (adapter) => new PrismaClient({ adapter }),
          embedded: { dataDir, shards },
          onProgress: (e) => events.push(e),
        });
      const first = await open();
      expect(first.describe).toContain(dataDir);
      expect(first.registry.databases.map((p) => p.shards.map((s) => s.key))).toEqual([["0/0"], ["1/0"]]);
      const id = ShardedId.generate("Customer", shards[1]!);
      await first.registry.clientFor(id).customer.create({ data: { id, name: "kept", region: "mx" } });
      await first.close();
      const statuses = () =>
        events.filter((e) => e.type === "done").map((e) => (e.type === "done" ? e.report.status : ""));
      expect(statuses()).toEqual(["applied", "applied"]);
      events.length = 0;
      const again = await open();
      expect(statuses()).toEqual(["unchanged", "unchanged"]);
      // Known without the schema engine: each database's recorded fingerprint matched.
      expect(events.flatMap((e) => (e.type === "done" ? [e.report.fingerprint] : []))).toEqual([
        "matched",
        "matched",
      ]);
      expect((await again.registry.clientFor(id).customer.findUnique({ where: { id } }))?.name).toBe("kept");
      await again.close();
      // Two PGlite pushes are CPU work on this thread: minutes on a host whose cores are all busy.
    },
    patient(300_000),
  );

  it("embedded shards where PGlite is not installed: a RegistryConfigError naming the packages to install, or PostgreSQL to give", async () => {
    const missing = "@shardkit/no-such-package";
    const error = await embeddedPackage(
      () => import(/* @vite-ignore */ missing),
      "pglite-prisma-adapter",
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RegistryConfigError);
    expect((error as RegistryConfigError).issues).toEqual([
      "embedded (PGlite) shards need pglite-prisma-adapter, which is not installed: install @electric-sql/pglite and pglite-prisma-adapter (npm install @electric-sql/pglite pglite-prisma-adapter), or give PostgreSQL databases (shardsJson; SHARDKIT_SHARDS in the templates)",
    ]);
    expect((error as Error).cause).toMatchObject({ code: "ERR_MODULE_NOT_FOUND" });
    // Any other failure of the import is not hidden behind it.
    await expect(embeddedPackage(() => Promise.reject(new SyntaxError("broken")), "x")).rejects.toThrow(
      SyntaxError,
    );
  });

  it(
    "a database whose recorded fingerprint matches skips the schema engine; a changed schema, a changed or dropped fingerprint and a schema changed by hand get the push",
    async () => {
      const names = [0, 1, 2].map((i) => `sk_open_fp_${i}_${process.pid}`);
      const urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
      const shardsJson = JSON.stringify(urls.map((url, i) => ({ group: i, member: 0, url, pool: 2 })));
      const sql = (i: number, statement: string) => query(urls[i]!, statement);
      /** Opens the three databases with `schemaFile` and closes them: each one's [status, fingerprint], in order. */
      const openWith = async (schemaFile: string, rolloutConcurrency?: number) => {
        const done = new Map<number, [string, string | undefined]>();
        const opened = await openShards({
          schema: schemaFile,
          createClient: (adapter) => new PrismaClient({ adapter }),
          shardsJson,
          ...(rolloutConcurrency === undefined ? {} : { rolloutConcurrency }),
          onProgress: (e) => {
            if (e.type === "done") done.set(e.index, [e.report.status, e.report.fingerprint]);
          },
          onState: () => {},
        });
        expect(opened.databases().map((d) => d.state)).toEqual(["ready", "ready", "ready"]);
        await opened.close();
        return [0, 1, 2].map((i) => done.get(i));
      };
      try {
        expect(await openWith(schema)).toEqual(urls.map(() => ["applied", "absent"]));
        expect(await openWith(schema)).toEqual(urls.map(() => ["unchanged", "matched"]));

        // Someone changed one fingerprint, dropped another's table, and a column of the third by hand.
        await sql(0, `UPDATE shardkit."ShardkitSchema" SET fingerprint = 'tampered'`);
        await sql(1, `DROP TABLE shardkit."ShardkitSchema"`);
        await sql(2, `ALTER TABLE "Setting" DROP COLUMN "value"`);
        expect(await openWith(schema, 1)).toEqual([
          ["unchanged", "changed"],
          ["unchanged", "absent"],
          ["applied", "drifted"],
        ]);
        expect(await openWith(schema)).toEqual(urls.map(() => ["unchanged", "matched"]));

        // A new version of the schema: every database gets it, once.
        const dir = mkdtempSync(join(tmpdir(), "sk-open-fp-"));
        const grown = join(dir, "schema.prisma");
        writeFileSync(grown, `${readFileSync(schema, "utf8")}\nmodel Note {\n  id Int @id\n}\n`);
        expect(await openWith(grown)).toEqual(urls.map(() => ["applied", "changed"]));
        expect(await openWith(grown)).toEqual(urls.map(() => ["unchanged", "matched"]));
      } finally {
        for (const name of names) await dropDatabase(MAIN_PORT, name);
      }
    },
    patient(180_000),
  );

  it("a bad shardsJson is a RegistryConfigError before anything connects", async () => {
    await expect(openShards({ schema, createClient: neverCalled, shardsJson: "[" })).rejects.toBeInstanceOf(
      RegistryConfigError,
    );
    await expect(
      openShards({
        schema,
        createClient: neverCalled,
        shardsJson: JSON.stringify([{ group: 0, member: 0, url: "nope" }]),
      }),
    ).rejects.toThrow(/shards\[0\]\.url: not a URL/);
  });

  it(
    "pools over the server's max_connections are refused before the schema reaches any database",
    async () => {
      const names = [`sk_open_budget_a_${process.pid}`, `sk_open_budget_b_${process.pid}`];
      const urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
      try {
        const shardsJson = JSON.stringify([
          { group: 0, member: 0, url: urls[0], pool: 60 },
          { group: 1, member: 0, url: urls[1], pool: 60 },
        ]);
        const createClient = (adapter: SqlMigrationAwareDriverAdapterFactory) =>
          new PrismaClient({ adapter });
        const error = await openShards({ schema, createClient, shardsJson, onProgress: () => {} }).catch(
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(ConnectionBudgetError);
        expect((error as ConnectionBudgetError).servers[0]?.pools).toBe(120);
        for (const url of urls) expect(await publicTables(url)).toBe(0);
        const warned = await openShards({
          schema,
          createClient,
          shardsJson,
          connectionBudget: "warn",
          onProgress: () => {},
        });
        expect(warned.registry.databases.map((p) => p.pool)).toEqual([60, 60]);
        await warned.close();
      } finally {
        for (const name of names) await dropDatabase(MAIN_PORT, name);
      }
    },
    patient(60_000),
  );

  it("SHARDKIT_SHARDS set but blank is an error naming the variable, never a fallback to embedded", async () => {
    for (const blank of ["", "  \n"]) {
      const error = await openShards({
        schema,
        createClient: neverCalled,
        shardsJson: blank,
        embedded: { dataDir: "/nonexistent", shards },
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RegistryConfigError);
      expect((error as Error).message).toMatch(/SHARDKIT_SHARDS: set but empty/);
    }
  });

  it("one database under two URL spellings is refused before any schema change, naming both", async () => {
    const name = `sk_open_twice_${process.pid}`;
    const url = await createDatabase(MAIN_PORT, name);
    try {
      const twice = url.replace("postgresql://", "postgres://").replace("127.0.0.1", "localhost");
      const shardsJson = JSON.stringify([
        { group: 0, member: 0, url },
        { group: 1, member: 0, url: `${twice}?application_name=other` },
      ]);
      const error = await openShards({
        schema,
        createClient: (adapter) => new PrismaClient({ adapter }),
        shardsJson,
        onProgress: () => {},
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RegistryConfigError);
      expect((error as Error).message).toMatch(/\(shards 1\/0\) is the same database as .*\(shards 0\/0\)/);
      expect((error as Error).message).toContain(name);
      expect(await publicTables(url)).toBe(0);
    } finally {
      await dropDatabase(MAIN_PORT, name);
    }
  });

  it(
    "a database that is down at start: the open goes on without it, its shards fail as unavailable, and it gets its schema and opens when it returns",
    async () => {
      const databases = await upAndAway("down");
      const states: DatabaseStatus[] = [];
      let opened: OpenShards<PrismaClient> | undefined;
      try {
        await withClusterStopped(SECOND.cluster, SECOND.port, async () => {
          opened = await openShards({
            schema,
            createClient: (adapter) => new PrismaClient({ adapter }),
            shardsJson: databases.shardsJson,
            retry: { baseMs: 50, maxMs: 200 },
            onProgress: () => {},
            onState: (status) => states.push(status),
          });
          expect(opened.databases().map((d) => [d.shards, d.state])).toEqual([
            [["0/0"], "ready"],
            [["1/0"], "starting"],
          ]);
          const ok = ShardedId.generate("Customer", shards[0]!);
          await opened.registry.clientFor(ok).customer.create({ data: { id: ok, name: "up", region: "eu" } });
          const waiting = ShardedId.generate("Customer", shards[1]!);
          const refused = await opened.registry
            .clientFor(waiting)
            .customer.findUnique({ where: { id: waiting } })
            .catch((e: unknown) => e);
          expect(isShardUnavailable(refused)).toBe(true);
          const health = await opened.health({ timeoutMs: patient(1000) });
          expect(health.status).toBe("degraded");
          expect(health.shards.map((s) => [s.shard, s.state])).toEqual([
            ["0/0", "up"],
            ["1/0", "starting"],
          ]);
          expect(health.shards[1]!.error).toBeTruthy();
        });
        // The server is back: the retries find it, roll the schema out and open its client.
        await within(opened!.ready, 30_000, "the open becoming ready");
        expect(opened!.databases().map((d) => d.state)).toEqual(["ready", "ready"]);
        expect(states.at(-1)).toMatchObject({ shards: ["1/0"], state: "ready" });
        const id = ShardedId.generate("Customer", shards[1]!);
        await opened!.registry.clientFor(id).customer.create({ data: { id, name: "back", region: "mx" } });
        expect((await opened!.registry.clientFor(id).customer.findUnique({ where: { id } }))?.name).toBe(
          "back",
        );
        expect((await opened!.health()).status).toBe("ok");
      } finally {
        await opened?.close();
        await databases.drop();
      }
    },
    patient(90_000),
  );

  it(
    "a frozen database at start: the open waits connectTimeoutMs for it, not forever, and opens it once it answers",
    async () => {
      const databases = await upAndAway("frozen");
      let opened: OpenShards<PrismaClient> | undefined;
      try {
        await withClusterFrozen(SECOND.cluster, async () => {
          opened = await openShards({
            schema,
            createClient: (adapter) => new PrismaClient({ adapter }),
            shardsJson: databases.shardsJson,
            connectTimeoutMs: 500,
            retry: { baseMs: 50, maxMs: 200 },
            onProgress: () => {},
            onState: () => {},
          });
          expect(opened.databases().map((d) => d.state)).toEqual(["ready", "starting"]);
          expect(opened.databases()[1]!.error).toMatch(/500 ms|timed out|time/i);
          const health = await opened.health({ timeoutMs: patient(300) });
          expect(health.shards.map((s) => s.state)).toEqual(["up", "starting"]);
        });
        await within(opened!.ready, 30_000, "the open becoming ready");
        const id = ShardedId.generate("Customer", shards[1]!);
        await opened!.registry.clientFor(id).customer.create({ data: { id, name: "thawed", region: "mx" } });
      } finally {
        await opened?.close();
        await databases.drop();
      }
    },
    patient(90_000),
  );

  it("a database that answers with an error (it does not exist) fails the open: that is configuration, not an outage", async () => {
    const error = await openShards({
      schema,
      createClient: (adapter) => new PrismaClient({ adapter }),
      shardsJson: JSON.stringify([
        {
          group: 0,
          member: 0,
          url: `postgresql://postgres@127.0.0.1:${MAIN_PORT}/sk_missing_${process.pid}`,
        },
      ]),
      onProgress: () => {},
      onState: () => {},
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RegistryConfigError);
    expect((error as Error).message).toMatch(/sk_missing_.*DatabaseDoesNotExist/);
  });
});
