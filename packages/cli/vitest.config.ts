import { packageProject } from "@shardkit/vitest-config";

// Tests run the built binary (dist/cli.js) against real PostgreSQL databases and clusters of their
// own. They mostly wait on child processes and databases, so files run three at a time.
const config = packageProject(import.meta.url, {
  testTimeout: 60_000,
  globalSetup: ["test/global-setup.ts"],
});
export default { ...config, test: { ...config.test, maxWorkers: 3 } };
