import { library } from "@shardkit/tsup-config";

// Three entries sharing one set of classes: common code goes to chunks they import.
export default library({ entry: ["src/index.ts", "src/rollout.ts", "src/internal.ts"], splitting: true });
