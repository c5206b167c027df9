import { packageProject } from "@shardkit/vitest-config";

// Tests share their shard databases (created once by the global setup), so files run one at a time.
export default packageProject(import.meta.url, {
  globalSetup: ["test/global-setup.ts"],
  fileParallelism: false,
});
