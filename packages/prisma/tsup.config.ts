import { library } from "@shardkit/tsup-config";

export default library({ entry: ["src/index.ts", "src/rollout.ts"] });
