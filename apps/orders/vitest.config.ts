import { packageProject } from "@shardkit/vitest-config";

// The tests share shard databases (created once by the global setup), so files run one at a time.
export default packageProject(import.meta.url, {
  globalSetup: ["src/test/global-setup.ts"],
  fileParallelism: false,
  testTimeout: 120_000,
});
