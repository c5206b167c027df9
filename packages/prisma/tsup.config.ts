import { library } from "@shardkit/tsup-config";

// `./rollout` imports the main entry by its package name, so both entries share one set of classes.
export default library({ entry: ["src/index.ts", "src/rollout.ts"], external: ["@shardkit/prisma"] });
