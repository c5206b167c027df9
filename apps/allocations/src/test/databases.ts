import { readFileSync } from "node:fs";
import { patient, testDatabases } from "@shardkit/test-db";
import { afterAll, beforeAll } from "vitest";

/** The project's package name: what its test servers are named after (`testCluster`). */
export const PACKAGE_NAME: string = JSON.parse(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
).name;

/**
 * The databases of a test file or block (`testDatabases`), made before its tests and dropped after
 * them, each step within `limitMs` (`patient`). Where their server may not be made, the warning
 * says why `what` is skipped, and so does the run's `skipped` (for the test's `skip(...)`).
 */
export function databasesFor(what: string, options: Parameters<typeof testDatabases>[0], limitMs: number) {
  let run: Awaited<ReturnType<typeof testDatabases>> | undefined;
  beforeAll(async () => {
    run = await testDatabases(options);
    if (run.skipped) console.warn(`skipping ${what}: ${run.skipped}`);
  }, patient(limitMs));
  afterAll(() => run?.drop(), patient(limitMs));
  return () => run!;
}
