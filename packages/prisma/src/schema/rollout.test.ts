import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardIdentifier } from "@shardkit/id";
import { createDatabase, dropDatabase, MAIN_PORT, patient } from "@shardkit/test-db";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { afterAll, describe, expect, it } from "vitest";
import { SCHEMA_MODELS } from "../../test/layout.js";
import {
  type RolloutEvent,
  type RolloutReport,
  type RolloutTarget,
  rolloutSchema,
  SchemaRolloutError,
} from "../rollout.js";

const schemaPath = new URL("../../test/schema.prisma", import.meta.url).pathname;

async function tables(
  query: (sql: string) => Promise<{ rows: { table_name: string }[] }>,
): Promise<string[]> {
  const { rows } = await query(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
  );
  return rows.map((r) => r.table_name);
}

/** A migrations folder of two migrations: a table, then a column. */
function migrationsDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "sk-migrations-"));
  writeFileSync(join(dir, "migration_lock.toml"), 'provider = "postgresql"\n');
  mkdirSync(join(dir, "20260101000000_init"));
  writeFileSync(
    join(dir, "20260101000000_init", "migration.sql"),
    'CREATE TABLE "Ledger" ("id" UUID NOT NULL PRIMARY KEY, "amount" BIGINT NOT NULL);\n',
  );
  mkdirSync(join(dir, "20260102000000_memo"));
  writeFileSync(
    join(dir, "20260102000000_memo", "migration.sql"),
    'ALTER TABLE "Ledger" ADD COLUMN "memo" TEXT;\n',
  );
  return dir;
}

describe("rolloutSchema on PGlite (push)", () => {
  const dbs = [new PGlite(), new PGlite()];
  afterAll(async () => {
    for (const db of dbs) await db.close();
  });

  it(
    "pushes the schema to every shard with progress, and a rerun changes nothing",
    async () => {
      const events: RolloutEvent[] = [];
      const targets = dbs.map((db, i) => ({
        name: `pglite-${i}`,
        adapter: new PrismaPGlite(db),
        shards: [ShardIdentifier.of(i, 0), ShardIdentifier.of(i, 1)],
      }));
      const first = await rolloutSchema({ schema: schemaPath, targets, onProgress: (e) => events.push(e) });
      expect(first.ok).toBe(true);
      expect(first.targets.map((t) => [t.name, t.status, t.shards])).toEqual([
        ["pglite-0", "applied", ["0/0", "0/1"]],
        ["pglite-1", "applied", ["1/0", "1/1"]],
      ]);
      expect(first.targets[0]!.changes).toBeGreaterThan(5);
      expect(events.map((e) => `${e.type} ${e.index + 1}/${e.total}`)).toEqual([
        "start 1/2",
        "done 1/2",
        "start 2/2",
        "done 2/2",
      ]);
      for (const db of dbs) {
        expect(await tables((sql) => db.query(sql))).toEqual(SCHEMA_MODELS);
      }
      // Without skipUnchanged the engine compares every target: no fingerprint check is reported.
      expect(first.targets.map((t) => t.fingerprint)).toEqual([undefined, undefined]);
      const again = await rolloutSchema({ schema: schemaPath, targets, onProgress: () => {} });
      expect(again.targets.map((t) => [t.status, t.changes, t.fingerprint])).toEqual([
        ["unchanged", 0, undefined],
        ["unchanged", 0, undefined],
      ]);
      // With it, the fingerprint each push recorded answers for the engine.
      const skipped = await rolloutSchema({
        schema: schemaPath,
        targets,
        skipUnchanged: true,
        onProgress: () => {},
      });
      expect(skipped.targets.map((t) => [t.status, t.fingerprint])).toEqual([
        ["unchanged", "matched"],
        ["unchanged", "matched"],
      ]);
      for (const db of dbs) {
        expect(await tables((sql) => db.query(sql))).toEqual(SCHEMA_MODELS);
      }
    },
    patient(120_000),
  );

  it(
    "refuses a push that would lose data unless acceptDataLoss is set",
    async () => {
      const db = dbs[0]!;
      await db.query(`INSERT INTO "Setting" (name, value) VALUES ('k', 'v')`);
      const dir = mkdtempSync(join(tmpdir(), "sk-schema-"));
      const smaller = join(dir, "schema.prisma");
      writeFileSync(
        smaller,
        'datasource db {\n  provider = "postgresql"\n}\n\nmodel Other {\n  id Int @id\n}\n',
      );
      const target = [{ name: "pglite-0", adapter: new PrismaPGlite(db) }];
      const error = await rolloutSchema({ schema: smaller, targets: target, onProgress: () => {} }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SchemaRolloutError);
      expect((error as SchemaRolloutError).report.targets[0]?.error).toMatch(/acceptDataLoss/);
      expect(await tables((sql) => db.query(sql))).toContain("Setting");
      // A push not applied records nothing: checked again, the smaller schema is still not the one
      // the database has, and the engine refuses it again.
      const checked = await rolloutSchema({
        schema: smaller,
        targets: target,
        skipUnchanged: true,
        onProgress: () => {},
      }).catch((e: unknown) => e);
      expect((checked as SchemaRolloutError).report.targets.map((t) => [t.status, t.fingerprint])).toEqual([
        ["failed", "changed"],
      ]);
    },
    patient(60_000),
  );
});

describe("rolloutSchema on PostgreSQL (migrate)", () => {
  const names = [0, 1, 2].map((i) => `sk_rollout_${process.pid}_${i}`);
  afterAll(async () => {
    for (const name of names) await dropDatabase(MAIN_PORT, name);
  });

  it(
    "applies migrations shard by shard, stops at the first failure, and a rerun finishes the rest",
    async () => {
      const urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
      // Someone created a table by hand on the second shard: Prisma refuses to migrate a non-empty
      // database that has no migration history.
      const blocker = new pg.Client({ connectionString: urls[1] });
      blocker.on("error", () => {});
      await blocker.connect();
      await blocker.query('CREATE TABLE "Ledger" ("id" INT PRIMARY KEY)');
      const targets = urls.map((url, i) => ({
        name: names[i]!,
        adapter: new PrismaPg({ connectionString: url }),
      }));
      const migrations = migrationsDir();

      const error = await rolloutSchema({ migrations, targets, onProgress: () => {} }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SchemaRolloutError);
      const report = (error as SchemaRolloutError).report;
      expect(report.ok).toBe(false);
      expect(report.targets.map((t) => t.status)).toEqual(["applied", "failed", "skipped"]);
      expect(report.targets[0]!.appliedMigrations).toEqual(["20260101000000_init", "20260102000000_memo"]);
      expect(report.targets[1]!.error).toMatch(/not empty/);

      // An operator removes the stray table, then reruns the same rollout.
      await blocker.query('DROP TABLE "Ledger"');
      await blocker.end();
      const rerun = await rolloutSchema({ migrations, targets, onProgress: () => {} });
      expect(rerun.targets.map((t) => [t.status, t.appliedMigrations.length])).toEqual([
        ["unchanged", 0],
        ["applied", 2],
        ["applied", 2],
      ]);
      for (const url of urls) {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        const { rows } = await client.query(
          `SELECT column_name FROM information_schema.columns WHERE table_name = 'Ledger' ORDER BY column_name`,
        );
        await client.end();
        expect(rows.map((r) => r.column_name)).toEqual(["amount", "id", "memo"]);
      }

      // Each migrate recorded what it applied: checked, nothing runs; a new migration does.
      const checked = await rolloutSchema({ migrations, targets, skipUnchanged: true, onProgress: () => {} });
      expect(checked.targets.map((t) => [t.status, t.fingerprint])).toEqual([
        ["unchanged", "matched"],
        ["unchanged", "matched"],
        ["unchanged", "matched"],
      ]);
      mkdirSync(join(migrations, "20260103000000_note"));
      writeFileSync(
        join(migrations, "20260103000000_note", "migration.sql"),
        'ALTER TABLE "Ledger" ADD COLUMN "note" TEXT;\n',
      );
      const next = await rolloutSchema({ migrations, targets, skipUnchanged: true, onProgress: () => {} });
      expect(next.targets.map((t) => [t.status, t.fingerprint, t.appliedMigrations])).toEqual(
        targets.map(() => ["applied", "changed", ["20260103000000_note"]]),
      );
    },
    patient(120_000),
  );
});

describe("rolloutSchema on several databases at once (concurrency)", () => {
  const names = [0, 1, 2, 3, 4, 5].map((i) => `sk_rollout_par_${process.pid}_${i}`);
  let urls: string[] = [];
  afterAll(async () => {
    for (const name of names) await dropDatabase(MAIN_PORT, name);
  });

  it(
    "reports every target in the targets' order, with progress keeping index and total",
    async () => {
      urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
      const targets = urls.map((url, i) => ({
        name: names[i]!,
        adapter: new PrismaPg({ connectionString: url }),
      }));
      const events: RolloutEvent[] = [];
      const report = await rolloutSchema({
        schema: schemaPath,
        targets,
        concurrency: 3,
        onProgress: (e) => events.push(e),
      });
      expect(report.targets.map((t) => [t.name, t.status])).toEqual(names.map((n) => [n, "applied"]));
      // Three start before any ends; each target starts once, then ends once.
      expect(events.slice(0, 3).map((e) => `${e.type} ${e.index}`)).toEqual([
        "start 0",
        "start 1",
        "start 2",
      ]);
      for (const [index] of names.entries()) {
        expect(events.filter((e) => e.index === index).map((e) => e.type)).toEqual(["start", "done"]);
      }
      expect(events.every((e) => e.total === names.length)).toBe(true);
    },
    patient(120_000),
  );

  it(
    "at a failure no further target starts; those under way finish and are reported",
    async () => {
      // The second target fails at its first connection; the first waits, inside its own rollout,
      // until that failure is reported, so it is under way when the rollout stops.
      let failed!: () => void;
      const secondFailed = new Promise<void>((resolve) => {
        failed = resolve;
      });
      const waitsForTheFailure = (url: string): RolloutTarget["adapter"] => {
        const inner = new PrismaPg({ connectionString: url });
        return {
          provider: inner.provider,
          adapterName: inner.adapterName,
          connect: async () => {
            await secondFailed;
            return inner.connect();
          },
          connectToShadowDb: () => inner.connectToShadowDb(),
        };
      };
      const failing: RolloutTarget["adapter"] = {
        provider: "postgres",
        adapterName: "@prisma/adapter-pg",
        connect: async () => {
          throw new Error("refused: no such server");
        },
        connectToShadowDb: async () => {
          throw new Error("no shadow database");
        },
      };
      const targets: RolloutTarget[] = urls.map((url, i) => ({
        name: names[i]!,
        adapter:
          i === 1 ? failing : i === 0 ? waitsForTheFailure(url) : new PrismaPg({ connectionString: url }),
      }));
      const error = await rolloutSchema({
        schema: schemaPath,
        targets,
        concurrency: 2,
        onProgress: (e) => {
          if (e.type === "done" && e.index === 1) failed();
        },
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SchemaRolloutError);
      const report = (error as SchemaRolloutError).report;
      expect(report.targets.map((t) => [t.name, t.status])).toEqual([
        [names[0], "unchanged"],
        [names[1], "failed"],
        ...names.slice(2).map((n) => [n, "skipped"]),
      ]);
      expect(report.targets[1]!.error).toMatch(/no such server/);
    },
    patient(120_000),
  );
});

describe("two copies of the package in one process (source and build, as a test runner may load)", () => {
  it(
    "share one schema engine: concurrent rollouts through both succeed",
    async () => {
      const built = (await import(new URL("../../dist/rollout.js", import.meta.url).href)) as {
        rolloutSchema: typeof rolloutSchema;
      };
      expect(built.rolloutSchema).not.toBe(rolloutSchema);
      const names = [1, 2, 3, 4].map((i) => `sk_rollout_copies_${i}_${process.pid}`);
      const urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
      const target = (i: number) => ({
        name: names[i]!,
        adapter: new PrismaPg({ connectionString: urls[i]! }),
      });
      try {
        const [first, second] = await Promise.all([
          rolloutSchema({ schema: schemaPath, targets: [target(0), target(1)], onProgress: () => {} }),
          built.rolloutSchema({ schema: schemaPath, targets: [target(2), target(3)], onProgress: () => {} }),
        ]);
        expect([...first.targets, ...second.targets].map((t) => t.status)).toEqual([
          "applied",
          "applied",
          "applied",
          "applied",
        ]);
      } finally {
        for (const name of names) await dropDatabase(MAIN_PORT, name);
      }
    },
    patient(120_000),
  );
});

describe("two rollouts at once to one fresh database (two services starting together)", () => {
  const names = ["push", "migrate"].map((mode) => `sk_rollout_race_${mode}_${process.pid}`);
  afterAll(async () => {
    for (const name of names) await dropDatabase(MAIN_PORT, name);
  });

  /** Three rollouts of `options` to `url` at once, each through adapters (connections) of its own. */
  const together = (url: string, options: { schema: string } | { migrations: string }) =>
    Promise.all(
      [1, 2, 3].map(() =>
        rolloutSchema({
          ...options,
          targets: [{ name: "race", adapter: new PrismaPg({ connectionString: url }) }],
          onProgress: () => {},
        }).catch((e: unknown) => e),
      ),
    );

  it(
    "push: every rollout succeeds, one applies the schema and the others find it there",
    async () => {
      const url = await createDatabase(MAIN_PORT, names[0]!);
      const reports = await together(url, { schema: schemaPath });
      for (const report of reports) expect(report).not.toBeInstanceOf(Error);
      const statuses = reports.map((r) => (r as RolloutReport).targets[0]!.status).sort();
      expect(statuses).toEqual(["applied", "unchanged", "unchanged"]);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        expect(await tables((sql) => client.query(sql))).toEqual(SCHEMA_MODELS);
      } finally {
        await client.end();
      }
    },
    patient(120_000),
  );

  it(
    "migrate: every rollout succeeds, and each migration is applied once",
    async () => {
      const url = await createDatabase(MAIN_PORT, names[1]!);
      const reports = await together(url, { migrations: migrationsDir() });
      for (const report of reports) expect(report).not.toBeInstanceOf(Error);
      const applied = reports.flatMap((r) => (r as RolloutReport).targets[0]!.appliedMigrations);
      expect(applied).toEqual(["20260101000000_init", "20260102000000_memo"]);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query(
          "SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL ORDER BY migration_name",
        );
        expect(rows.map((r) => r.migration_name)).toEqual(["20260101000000_init", "20260102000000_memo"]);
      } finally {
        await client.end();
      }
    },
    patient(120_000),
  );
});
