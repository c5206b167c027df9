import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, MAIN_PORT, patient } from "@shardkit/test-db";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCHEMA_MODELS } from "../../test/layout.js";
import {
  checkFingerprint,
  FINGERPRINT_TABLE,
  fingerprintOf,
  recordFingerprint,
} from "./schema-fingerprint.js";
import { rolloutSchema } from "./schema-rollout.js";

const schemaPath = new URL("../../test/schema.prisma", import.meta.url).pathname;

describe("fingerprintOf", () => {
  it("changes with the mode, the engine's version and every part, and never by moving a boundary", () => {
    const base = fingerprintOf("push", "7.10.0", ["ab", "c"]);
    expect(fingerprintOf("push", "7.10.0", ["ab", "c"])).toBe(base);
    expect(
      new Set([
        base,
        fingerprintOf("migrate", "7.10.0", ["ab", "c"]),
        fingerprintOf("push", "7.10.1", ["ab", "c"]),
        fingerprintOf("push", "7.10.0", ["a", "bc"]),
        fingerprintOf("push", "7.10.0", ["abc"]),
        fingerprintOf("push", "7.10.0", ["ab", "c", ""]),
      ]).size,
    ).toBe(6);
  });
});

describe("a database's recorded fingerprint (PostgreSQL)", () => {
  const name = `sk_fingerprint_${process.pid}`;
  let url = "";
  let admin: pg.Client;
  const adapter = () => new PrismaPg({ connectionString: url, max: 1 });
  const record = (fingerprint: string) =>
    recordFingerprint(adapter(), { fingerprint, mode: "push", engine: "test" });

  beforeAll(async () => {
    url = await createDatabase(MAIN_PORT, name);
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await rolloutSchema({
      schema: schemaPath,
      targets: [{ name, adapter: adapter() }],
      onProgress: () => {},
    });
  }, patient(60_000));
  afterAll(async () => {
    await admin?.end();
    await dropDatabase(MAIN_PORT, name);
  });

  it(
    "lives outside the application's schema, where a push neither sees it nor drops it",
    async () => {
      // rolloutSchema recorded one after its push.
      expect(await checkFingerprint(adapter(), "another")).toBe("changed");
      const { rows } = await admin.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
      );
      expect(rows.map((r) => r.table_name)).toEqual(SCHEMA_MODELS);
      const again = await rolloutSchema({
        schema: schemaPath,
        targets: [{ name, adapter: adapter() }],
        onProgress: () => {},
      });
      expect(again.targets.map((t) => [t.status, t.changes, t.warnings])).toEqual([["unchanged", 0, []]]);
    },
    patient(60_000),
  );

  it("absent without a table; matched once recorded; changed for another fingerprint", async () => {
    await admin.query(`DROP TABLE ${FINGERPRINT_TABLE}`);
    expect(await checkFingerprint(adapter(), "fp-1")).toBe("absent");
    await admin.query("DROP SCHEMA shardkit");
    expect(await checkFingerprint(adapter(), "fp-1")).toBe("absent");
    await record("fp-1");
    expect(await checkFingerprint(adapter(), "fp-1")).toBe("matched");
    expect(await checkFingerprint(adapter(), "fp-2")).toBe("changed");
    await record("fp-2"); // a later rollout replaces it
    expect(await checkFingerprint(adapter(), "fp-2")).toBe("matched");
    await admin.query(`DELETE FROM ${FINGERPRINT_TABLE}`);
    expect(await checkFingerprint(adapter(), "fp-2")).toBe("absent");
  });

  it("drifted when the schema changed after it was recorded, whatever the change", async () => {
    const changes = [
      ['ALTER TABLE "Setting" ADD COLUMN "extra" TEXT', 'ALTER TABLE "Setting" DROP COLUMN "extra"'],
      [
        'ALTER TABLE "Setting" ALTER COLUMN "value" DROP NOT NULL',
        'ALTER TABLE "Setting" ALTER COLUMN "value" SET NOT NULL',
      ],
      ['CREATE INDEX "by_value" ON "Setting" ("value")', 'DROP INDEX "by_value"'],
      [
        'ALTER TABLE "Wallet" ALTER COLUMN "balance" SET DEFAULT 5',
        'ALTER TABLE "Wallet" ALTER COLUMN "balance" SET DEFAULT 0',
      ],
      ["CREATE TYPE \"Mood\" AS ENUM ('calm')", 'DROP TYPE "Mood"'],
      ['CREATE TABLE "Stray" ("id" INT)', 'DROP TABLE "Stray"'],
    ];
    await record("fp-3");
    for (const [change, undo] of changes) {
      await admin.query(change!);
      expect([change, await checkFingerprint(adapter(), "fp-3")]).toEqual([change, "drifted"]);
      await admin.query(undo!);
      expect([undo, await checkFingerprint(adapter(), "fp-3")]).toEqual([undo, "matched"]);
    }
    // Rows are not the schema.
    await admin.query(`INSERT INTO "Setting" (name, value) VALUES ('k', 'v')`);
    expect(await checkFingerprint(adapter(), "fp-3")).toBe("matched");
  });

  it("one row per PostgreSQL schema pushed into (the adapter's `schema` option)", async () => {
    await admin.query("CREATE SCHEMA IF NOT EXISTS other");
    const other = () => new PrismaPg({ connectionString: url, max: 1 }, { schema: "other" });
    await record("fp-public");
    expect(await checkFingerprint(other(), "fp-public")).toBe("absent");
    await recordFingerprint(other(), { fingerprint: "fp-other", mode: "push", engine: "test" });
    expect(await checkFingerprint(other(), "fp-other")).toBe("matched");
    expect(await checkFingerprint(adapter(), "fp-public")).toBe("matched");
    // A table in one schema is no drift of the other.
    await admin.query('CREATE TABLE other."Thing" ("id" INT)');
    expect(await checkFingerprint(adapter(), "fp-public")).toBe("matched");
    expect(await checkFingerprint(other(), "fp-other")).toBe("drifted");
  });
});
