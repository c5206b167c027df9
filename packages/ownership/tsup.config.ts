import { library } from "@shardkit/tsup-config";

export default library({ external: ["@shardkit/id", "@shardkit/prisma", "@shardkit/scatter"] });
