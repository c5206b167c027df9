// What every run of the demo (src/demo.ts) must print, shared by its tests on embedded PGlite
// (demo.test.ts) and on PostgreSQL (demo-postgres.test.ts).
import { runProgram } from "@shardkit/test-db";
import { expect } from "vitest";

/** Runs the demo (tsx src/demo.ts) with `env` and returns what it printed; `signal` (the test's) kills it. */
export const demo = (signal: AbortSignal, env: Record<string, string> = {}) =>
  runProgram("src/demo.ts", { cwd: new URL("../..", import.meta.url).pathname, env, signal });

/** What every run of the demo must show, whatever its databases. */
export function expectSoldOutOnce(output: string, mode: "live" | "offline") {
  expect(output).toContain("bucket B-173 (1000 units) on shard 0/1, in ");
  expect(output).toMatch(
    new RegExp(
      `moved shard 0/1 from .+ to .+ \\(epoch 2, ${mode}\\) while the desks confirmed: writes held \\d+ ms, \\d+ ms in all`,
    ),
  );
  expect(output).toMatch(/confirmations: 1000 answered, 1000 recorded in .+ \(capacity 1000\)/);
  expect(output).toContain("double decisions: 0");
  expect(output).toMatch(/desk two: [1-9]\d* stale-route rejections/);
  // The demo retries the key of whichever desk confirmed first: on PostgreSQL either desk may.
  expect(output).toMatch(/retrying desk (one|two)'s first key: HTTP 201, the recorded confirmation/);
}

/**
 * Each long step of the demo is announced by a line printed before it starts, in this order, so a
 * person watching is never left without a word while the step runs (however slow the machine).
 */
export function expectStepsAnnounced(output: string, opening: RegExp) {
  const lines = output.split("\n");
  const steps = [
    opening,
    /^opening two desks/,
    /^bucket B-173/,
    /^the desks confirm B-173's units/,
    /^moving shard 0\/1 to .+ while the desks go on/,
    /^ {2}1000 units confirmed$/,
    /^moved shard 0\/1/,
  ];
  const at = steps.map((step) => lines.findIndex((line) => step.test(line)));
  expect(
    at.filter((i) => i < 0),
    `a step without its line:\n${output}`,
  ).toEqual([]);
  expect(at).toEqual([...at].sort((a, b) => a - b));
}
