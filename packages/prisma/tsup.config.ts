import { library } from "@shardkit/tsup-config";

// Two entries sharing one set of classes: common code goes to chunks both import.
export default library({ entry: ["src/index.ts", "src/rollout.ts"], splitting: true });
