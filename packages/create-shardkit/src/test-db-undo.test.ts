// The templates' src/test/test-db.js (tooling/test-db): a global setup that fails part-way leaves
// nothing it made behind. Its steps go through `undoable`; when it throws, what they made is dropped
// before the error reaches vitest, whose run would otherwise leave the servers running.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  createDatabase,
  dropDatabase,
  MAIN_PORT,
  ownCluster,
  patient,
  pgUrl,
  shareClusters,
  undoable,
  whyNoClusters,
  withClient,
} from "../../../tooling/test-db/index.js";

/** Whether pg_lsclusters lists cluster `name` (asked for it alone: a full list fails while another run drops one). */
function listed(name: string): boolean {
  const version = readdirSync("/etc/postgresql").sort().at(-1)!;
  try {
    execFileSync("pg_lsclusters", ["--no-header", version, name], { stdio: "pipe" });
    return true;
  } catch (error) {
    if (/does not exist/.test(String((error as { stderr?: unknown }).stderr))) return false;
    throw error;
  }
}

/** Whether the machine's server has database `name`. */
function hasDatabase(name: string): Promise<boolean> {
  return withClient(pgUrl(MAIN_PORT, "postgres"), async (c) => {
    const { rows } = await c.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    return rows.length === 1;
  });
}

describe("a global setup that fails part-way (tooling/test-db's undoable)", () => {
  it.skipIf(whyNoClusters() !== undefined)(
    "drops what it made before its error propagates: its database, its own servers (one still being made when it failed) and their records",
    async () => {
      const database = `sk_cs_undo_${process.pid}`;
      const servers: string[] = [];
      const setup = undoable(async (step) => {
        await step(createDatabase(MAIN_PORT, database), () => dropDatabase(MAIN_PORT, database));
        const own = await step(ownCluster("cs_undo"), (made) => made.drop());
        servers.push(own.cluster);
        expect(listed(own.cluster)).toBe(true);
        expect(existsSync(`/tmp/shardkit-own/${own.cluster}`)).toBe(true);
        // Made beside the rest (as the CLI's setup makes its clusters while it builds), and not
        // awaited: the setup fails before it is made.
        void step(ownCluster("cs_undo"), (made) => {
          servers.push(made.cluster);
          return made.drop();
        });
        throw new Error("the setup failed after making its server");
      });
      await expect(setup).rejects.toThrow("the setup failed after making its server");
      expect(servers).toHaveLength(2);
      for (const cluster of servers) {
        expect(listed(cluster)).toBe(false);
        expect(existsSync(`/tmp/shardkit-own/${cluster}`)).toBe(false);
      }
      expect(await hasDatabase(database)).toBe(false);
    },
    patient(120_000),
  );

  it("keeps the setup's error (its class and code), naming an undo that failed too; the teardown undoes every step in reverse, past one that fails", async () => {
    class Unavailable extends Error {
      code = "CLUSTERS_UNAVAILABLE";
    }
    const failed = await undoable(async (step) => {
      await step("a server", () => {
        throw new Error("its drop failed");
      });
      throw new Unavailable("no servers here");
    }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(Unavailable);
    expect(failed).toMatchObject({
      code: "CLUSTERS_UNAVAILABLE",
      message: "no servers here (and undoing what it had made failed: its drop failed)",
    });

    const undone: string[] = [];
    const teardown = await undoable(async (step) => {
      for (const thing of ["first", "second", "third"])
        await step(thing, (made) => {
          undone.push(made);
          if (made === "second") throw new Error("the second's undo failed");
        });
    });
    await expect(teardown()).rejects.toThrow("the second's undo failed");
    expect(undone).toEqual(["third", "second", "first"]);
  });

  it("drops what a shared make made before it failed, and records no user of it", async () => {
    const key = `cs-undo-${process.pid}`;
    const database = `sk_cs_undo_shared_${process.pid}`;
    try {
      const shared = shareClusters(key, {
        clusters: [],
        make: async () => {
          await createDatabase(MAIN_PORT, database);
          throw new Error("the make failed part-way");
        },
        drop: () => dropDatabase(MAIN_PORT, database),
      });
      await expect(shared).rejects.toThrow("the make failed part-way");
      expect(await hasDatabase(database)).toBe(false);
      expect(readdirSync(`/tmp/shardkit-users-${key}`)).not.toContain(String(process.pid));
    } finally {
      rmSync(`/tmp/shardkit-users-${key}`, { recursive: true, force: true });
    }
  });
});
