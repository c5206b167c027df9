import { library } from "@shardkit/tsup-config";

export default library();
