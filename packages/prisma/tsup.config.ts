import { library } from "@shardkit/tsup-config";

// Four entries sharing one set of classes: common code goes to chunks they import.
export default library({
  entry: ["src/index.ts", "src/rollout.ts", "src/internal.ts", "src/fastify.ts"],
  splitting: true,
});
