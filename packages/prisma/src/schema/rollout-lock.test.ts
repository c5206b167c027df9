import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, MAIN_PORT, patient } from "@shardkit/test-db";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { SCHEMA_MODELS } from "../../test/layout.js";
import { RolloutLockTimeoutError } from "../errors.js";
import { type RolloutReport, rolloutSchema, SchemaRolloutError } from "../rollout.js";
import { ROLLOUT_LOCK_KEY } from "./rollout-lock.js";

// A rollout waiting for the database's rollout lock gives up after its deadline (`lockTimeoutMs`),
// naming the rollout that holds it, instead of waiting forever; once the holder ends, it goes on.
const NAME = `sk_rollout_lock_${process.pid}`;
const schema = new URL("../../test/schema.prisma", import.meta.url).pathname;
afterAll(() => dropDatabase(MAIN_PORT, NAME));

const publicTables = async (client: pg.Client) =>
  (
    await client.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    )
  ).rows.map((r) => r.table_name);

describe("the rollout lock's deadline", () => {
  it(
    "a rollout behind a stuck one fails after lockTimeoutMs naming the holder's pid and application_name; nothing applied",
    async () => {
      const url = await createDatabase(MAIN_PORT, NAME);
      // A rollout that hangs while holding the lock (another service stuck in its schema set-up).
      const holder = new pg.Client({ connectionString: url, application_name: "stuck-rollout" });
      await holder.connect();
      const rollout = (lockTimeoutMs: number) =>
        rolloutSchema({
          schema,
          targets: [{ name: "locked", adapter: new PrismaPg({ connectionString: url }) }],
          lockTimeoutMs,
          onProgress: () => {},
        });
      try {
        const pid = (await holder.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
        await holder.query(`BEGIN; SELECT pg_advisory_xact_lock(${ROLLOUT_LOCK_KEY})`);

        const error = await rollout(200).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(SchemaRolloutError);
        const cause = (error as SchemaRolloutError).cause as RolloutLockTimeoutError;
        expect(cause).toBeInstanceOf(RolloutLockTimeoutError);
        expect(cause.code).toBe("ROLLOUT_LOCK_TIMEOUT");
        expect(cause.holder).toMatch(
          new RegExp(
            `^pid ${pid} \\(application_name "stuck-rollout", user postgres, from .*\\) holds it, in a transaction open since `,
          ),
        );
        expect(cause.message).toContain("was not free within 200 ms: pid");
        expect((error as SchemaRolloutError).report.targets[0]).toMatchObject({ status: "failed" });
        expect(await publicTables(holder)).toEqual([]);

        // The holder ends: the next rollout takes the lock and applies the schema.
        await holder.query("ROLLBACK");
        const report: RolloutReport = await rollout(patient(30_000));
        expect(report.targets[0]!.status).toBe("applied");
        expect(await publicTables(holder)).toEqual(SCHEMA_MODELS);
      } finally {
        await holder.end();
      }
    },
    patient(120_000),
  );

  it("lockTimeoutMs must be a positive integer", async () => {
    await expect(
      rolloutSchema({ schema, targets: [], lockTimeoutMs: 0, onProgress: () => {} }),
    ).rejects.toThrow("rolloutSchema: lockTimeoutMs must be a positive integer, got 0");
  });
});
