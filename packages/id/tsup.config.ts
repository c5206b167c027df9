import { library } from "@shardkit/tsup-config";

// `./zod` imports the main entry by its package name, so both entries share one generator and one set of errors.
export default library({ entry: ["src/index.ts", "src/zod.ts"], external: ["@shardkit/id"] });
