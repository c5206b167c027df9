import { library } from "@shardkit/tsup-config";

// The programmatic entry and the `shardkit` binary (src/cli.ts), sharing one copy of the code.
export default library({
  entry: ["src/index.ts", "src/cli.ts"],
  splitting: true,
  external: ["@shardkit/id", "@shardkit/ownership", "@shardkit/prisma", "@shardkit/selector"],
});
