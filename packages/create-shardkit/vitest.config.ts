import { packageProject } from "@shardkit/vitest-config";

// The end-to-end test installs, tests and runs each template in a fresh npm project: minutes, not
// seconds, and the templates' own timing-sensitive suites with it. It runs after every other project
// (groupOrder 1), so that nothing else loads the machine meanwhile.
export default packageProject(import.meta.url, { testTimeout: 60_000, hookTimeout: 420_000, groupOrder: 1 });
