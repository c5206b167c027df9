import { packageProject } from "@shardkit/vitest-config";

export default packageProject(import.meta.url, { testTimeout: 120_000 });
