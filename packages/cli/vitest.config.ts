import { packageProject } from "@shardkit/vitest-config";

// Tests run the built binary (dist/cli.js) against real PostgreSQL databases and clusters of their
// own (created by the global setup).
export default packageProject(import.meta.url, {
  testTimeout: 60_000,
  globalSetup: ["test/global-setup.ts"],
});
