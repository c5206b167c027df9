import { patient, runProgram, testCluster } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { databasesFor, PACKAGE_NAME } from "./test/databases.js";

/** Runs the balance demo (tsx src/balance-demo.ts) with `env` and returns what it printed; `signal` (the test's) kills it. */
const demo = (signal: AbortSignal, env: Record<string, string> = {}) =>
  runProgram("src/balance-demo.ts", { cwd: new URL("..", import.meta.url).pathname, env, signal });

/** What every run must show: load measured, shards moved off the hot database, no decision lost or doubled. */
function expectBalanced(output: string, mode: "live" | "offline") {
  expect(output).toMatch(/^3 clients.*; 88% of their decisions go to .+'s shards$/m);
  const before = output.match(
    /^before: hottest database (.+), (\d+)% of the load; clients' p99 [\d.]+ ms over [1-9]\d* decisions$/m,
  );
  expect(before, output).not.toBeNull();
  // The first database takes most of the load: its shards take most of the decisions.
  expect(Number(before![2])).toBeGreaterThan(60);
  expect(output).toMatch(/^ {2}moved 0\/\d+: writes held \d+ ms$/m);
  expect(output).not.toMatch(/failed:/);
  const moves = Number(output.match(/^balance: (\d+) moves/m)?.[1]);
  expect(moves).toBeGreaterThan(0);
  const after = output.match(
    /^after: hottest database (.+), (\d+)% of the load; clients' p99 [\d.]+ ms over [1-9]\d* decisions$/m,
  );
  expect(after, output).not.toBeNull();
  expect(Number(after![2])).toBeLessThan(Number(before![2]));
  const decisions = output.match(/^decisions: (\d+) acknowledged, (\d+) recorded; lost 0, doubled 0;/m);
  expect(decisions, output).not.toBeNull();
  expect(decisions![1]).toBe(decisions![2]);
  expect(mode).toBeDefined();
}

describe("the balance demo (tsx src/balance-demo.ts)", () => {
  it(
    "embedded PGlite: skewed traffic, the balancer moves shards off the hot database offline; nothing lost or doubled",
    async ({ signal }) => {
      const output = await demo(signal);
      // It says what it is doing before the databases' set-up, its longest silence otherwise.
      expect(output.split("\n")[0]).toBe(
        "opening 3 embedded PGlite databases in memory (db-a, db-b, db-c), the schema applied to each",
      );
      expect(output).toMatch(/^ {2}schema 3\/3 db-.: applying$/m);
      expect(output).toContain("databases: db-a (0/0 0/1 0/2 0/3), db-b (0/4 0/5), db-c (0/6 0/7)");
      expectBalanced(output, "offline");
    },
    patient(180_000),
  );

  describe("on PostgreSQL (SHARDKIT_SHARDS): client processes, live moves", () => {
    // Any database may be a move's source: three databases of one wal_level = logical server of the
    // project's own (SHARDKIT_TEST_CLUSTER=<name>:<port> names another; dropped after the test), so
    // every move is between two databases of one server. Where the test may not make the server, it
    // is skipped.
    const run = databasesFor(
      "the balance on PostgreSQL",
      {
        onServer: ["a", "b", "c"].map((k) => `sk_alloc_bal_${k}_${process.pid}`),
        server: testCluster(`${PACKAGE_NAME}-balance`),
        logical: true,
      },
      180_000,
    );

    it(
      "moves shards live off the hot database while three client processes decide: the same guarantees",
      async ({ skip, signal }) => {
        const urls = run(skip);
        const shards = JSON.stringify({
          shards: [
            ...[0, 1, 2, 3].map((member) => ({ group: 0, member, url: urls[0] })),
            ...[4, 5].map((member) => ({ group: 0, member, url: urls[1] })),
            ...[6, 7].map((member) => ({ group: 0, member, url: urls[2] })),
          ],
        });
        const output = await demo(signal, { SHARDKIT_SHARDS: shards });
        expect(output.split("\n")[0]).toBe("opening the mover's router on the databases of SHARDKIT_SHARDS");
        expect(output).toContain("3 clients (processes)");
        expectBalanced(output, "live");
        // The clients went on deciding while the shards moved.
        expect(output).toMatch(/the clients went on \(p99 [\d.]+ ms over [1-9]\d* decisions\)/);
      },
      patient(240_000),
    );
  });
});
