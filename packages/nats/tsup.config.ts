import { library } from "@shardkit/tsup-config";

export default library({
  external: ["@shardkit/id", "@shardkit/prisma", "@nats-io/jetstream", "@nats-io/nats-core"],
});
