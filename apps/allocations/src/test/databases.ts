import { readFileSync } from "node:fs";
import { patient, testDatabases } from "@shardkit/test-db";
import { afterAll, beforeAll } from "vitest";

/** The project's package name: what its test servers are named after (`testCluster`). */
export const PACKAGE_NAME: string = JSON.parse(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
).name;

/** A test's `skip` (its context's): skips the test, saying why, when `condition` holds. */
type Skip = (condition: boolean, note: string) => void;

/**
 * The databases of a test file or block (`testDatabases`), made before its tests and dropped after
 * them, each step within `limitMs` (`patient`). A test gets their URLs with `urls(skip)`, its own
 * `skip`: where their server may not be made, the test is skipped saying why, as the warning says
 * why `what` is. `urls.server()` is their server, the run's own (`{ cluster, port }`).
 */
export function databasesFor(what: string, options: Parameters<typeof testDatabases>[0], limitMs: number) {
  let run: Awaited<ReturnType<typeof testDatabases>> | undefined;
  beforeAll(async () => {
    run = await testDatabases(options);
    if (run.skipped) console.warn(`skipping ${what}: ${run.skipped}`);
  }, patient(limitMs));
  afterAll(() => run?.drop(), patient(limitMs));
  const urls = (skip: Skip): string[] => {
    skip(run!.skipped !== "", run!.skipped);
    return run!.urls;
  };
  return Object.assign(urls, { server: () => run!.server });
}
