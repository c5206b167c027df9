import { packageProject } from "@shardkit/vitest-config";

// The global setup makes a pair of shard databases for each test file that writes to them, and
// every test has a stream and subjects of its own on the machine's NATS server. Files still run one
// at a time: the relay and consumer processes the tests start, and the pack check, need the cores.
export default packageProject(import.meta.url, {
  globalSetup: ["test/global-setup.ts"],
  // The pack check's example consumes from the machine's NATS server, and needs no database.
  releaseGlobalSetup: ["test/release-setup.ts"],
  fileParallelism: false,
});
