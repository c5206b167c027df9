import { spawn } from "node:child_process";
import { patient } from "@shardkit/test-db";
import { afterAll, beforeEach, describe, expect, inject, it } from "vitest";
import { lineReader } from "../test/lines.js";
import { reset, router } from "../test/world.js";

// Service instances starting together: each opens its partition map over the same databases at
// the same moment, each in its own process (its own connections and sessions).
const urls = inject("ownershipUrls");
const r = router();
afterAll(() => r.close());
beforeEach(() => reset());

interface Opened {
  ok: boolean;
  error?: string;
  entries?: { shard: string; database: string; epoch: number; state: string }[];
  tables?: { table: string; column: string; kind?: string }[];
}

/**
 * `n` opener processes, each connected and waiting. `go` opens all of their maps at once; each then
 * closes its connections. `again` starts each over (a new registry, new connections, as a restarted
 * instance), connected and waiting for the next `go`. `end` closes their stdin: they exit.
 */
async function openers(n: number) {
  const children = Array.from({ length: n }, () =>
    spawn(process.execPath, ["--import", "tsx", "test/opener.ts"], {
      cwd: new URL("..", import.meta.url).pathname,
      env: { ...process.env, OWNERSHIP_URLS: JSON.stringify(urls) },
      stdio: ["pipe", "pipe", "inherit"],
    }),
  );
  const lines = children.map((child, i) => lineReader(child, `opener ${i + 1}`));
  const ready = async () =>
    expect(await Promise.all(lines.map((next) => next()))).toEqual(children.map(() => "ready"));
  await ready();
  return {
    go: async (): Promise<Opened[]> => {
      for (const child of children) child.stdin!.write("go\n");
      return Promise.all(lines.map(async (next) => JSON.parse(await next()) as Opened));
    },
    again: async () => {
      for (const child of children) child.stdin!.write("again\n");
      await ready();
    },
    end: () => {
      for (const child of children) {
        child.stdin!.end();
        child.kill();
      }
    },
  };
}

/** What the databases hold of shardkit's functions: one row per function. */
async function functions() {
  return r.clients.a.$queryRawUnsafe<{ name: string }[]>(
    `SELECT proname::text AS name FROM pg_proc WHERE proname::text LIKE 'shardkit\\_%' ORDER BY 1`,
  );
}

describe("service instances opening their maps at once", () => {
  it(
    "six processes open maps over the same databases at the same moment: every one opens, and all agree on the map",
    async () => {
      // Six processes, each a new instance in every round (a new registry, new connections): what
      // a round sets up in the databases comes before its instances connect.
      let six: Awaited<ReturnType<typeof openers>> | undefined;
      try {
        for (const round of ["fresh", "an older version installed", "installed"] as const) {
          if (round !== "installed") {
            for (const client of Object.values(r.clients)) {
              await client.$executeRawUnsafe("DROP FUNCTION IF EXISTS shardkit_refuse_write() CASCADE");
              await client.$executeRawUnsafe("DROP FUNCTION IF EXISTS shardkit_assert_owner(int, int)");
              await client.$executeRawUnsafe(`DELETE FROM "ShardOwnership"`);
              if (round === "an older version installed") {
                await client.$executeRawUnsafe(
                  `CREATE FUNCTION shardkit_assert_owner(bits int, expected int) RETURNS int LANGUAGE sql AS 'SELECT 0'`,
                );
              }
            }
          }
          if (six) await six.again();
          else six = await openers(6);
          const outcomes = await six.go();
          expect(
            outcomes.filter((o) => !o.ok).map((o) => o.error),
            round,
          ).toEqual([]);
          for (const o of outcomes) expect(o.entries, round).toEqual(outcomes[0]!.entries);
          expect(outcomes[0]!.entries).toEqual([
            { shard: "0/0", database: "a", epoch: 1, state: "owned" },
            { shard: "0/1", database: "a", epoch: 1, state: "owned" },
            { shard: "1/0", database: "b", epoch: 1, state: "owned" },
          ]);
          expect(await functions()).toEqual([
            { name: "shardkit_assert_owner" },
            { name: "shardkit_map_check" },
            { name: "shardkit_refuse_truncate" },
            { name: "shardkit_refuse_write" },
          ]);
          // The functions installed are the current ones: a shard transaction's assertion works.
          const [own] = await r.clients.a.$queryRawUnsafe<{ epoch: number }[]>(
            "SELECT shardkit_assert_owner(1, 1) AS epoch",
          );
          expect(own!.epoch).toBe(1);
        }
      } finally {
        six?.end();
      }
    },
    patient(120_000),
  );
});
