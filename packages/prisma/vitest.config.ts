import { packageProject } from "@shardkit/vitest-config";

// Tests share three shard databases (created once by the global setup), so files run one at a time.
// The read-replica tests have their own servers: a primary and two streaming replicas of it.
export default packageProject(import.meta.url, {
  globalSetup: ["test/global-setup.ts", "test/replica-setup.ts"],
  fileParallelism: false,
});
