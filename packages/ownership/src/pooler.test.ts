import { patient, pgBouncerPath, startPgBouncer } from "@shardkit/test-db";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { reset, routers, TABLES } from "../test/world.js";
import { checkMove } from "./check.js";

// A live move's check names a database whose URL reaches PgBouncer in transaction mode (a real
// PgBouncer in front of the target's server, on a port of this file's own), and not one reached
// directly. The routers' own clients connect directly; only the URLs the move would use differ.
const moveUrls = inject("moveUrls");
const make = routers(moveUrls);
beforeEach(() => reset(moveUrls));

describe.skipIf(!pgBouncerPath())("checkMove and a transaction-mode pooler", () => {
  const e = new URL(moveUrls.e);
  let bouncer: Awaited<ReturnType<typeof startPgBouncer>>;
  beforeAll(async () => {
    bouncer = await startPgBouncer({
      targetPort: Number(e.port),
      poolSize: 2,
      mode: "transaction",
    });
  }, patient(60_000));
  afterAll(() => bouncer?.stop());

  it(
    "the target reached through PgBouncer: an issue naming it; direct URLs, or an offline move: none",
    async () => {
      const r = make();
      const direct = (db: { name: string }) => moveUrls[db.name as "a" | "b" | "e"];
      const check = (connection: (db: { name: string }) => string, mode: "live" | "offline" = "live") =>
        checkMove({
          registry: r.registry,
          shard: "0/1",
          to: r.databases.e,
          tables: TABLES,
          mode,
          connection,
        });

      expect((await check(direct)).issues).toEqual([]);
      const pooled = (db: { name: string }) =>
        db.name === "e" ? bouncer.url(e.pathname.slice(1)) : direct(db);
      const issues = (await check(pooled)).issues;
      expect(issues).toHaveLength(1);
      expect(issues[0]).toMatch(
        /^e: its URL reaches a connection pooler in transaction mode \(PgBouncer or alike: (two client connections open at once were served by one server session \(pid \d+\)|one client connection was served by server sessions [\d, ]+ in turn)\); a live move needs a direct connection to the server/,
      );
      expect((await check(pooled, "offline")).issues).toEqual([]);
      // A URL the check cannot reach: it says it could not tell, never a silent pass.
      const closed = (db: { name: string }) =>
        db.name === "e" ? `postgresql://postgres@127.0.0.1:1/${e.pathname.slice(1)}` : direct(db);
      const unknown = (await check(closed)).issues.filter((i) => i.startsWith("e: could not tell"));
      expect(unknown).toHaveLength(1);
    },
    patient(60_000),
  );
});
