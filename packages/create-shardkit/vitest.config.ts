import { packageProject } from "@shardkit/vitest-config";

// The end-to-end test installs, tests and runs each template in a fresh npm project: minutes, not
// seconds (a hook packs and installs before its tests start).
export default packageProject(import.meta.url, { testTimeout: 60_000, hookTimeout: 420_000 });
