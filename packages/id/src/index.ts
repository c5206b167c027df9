export {
  type IdErrorByCode,
  type IdErrorCode,
  InvalidShardError,
  InvalidShardedIdError,
  isShardkitError,
  ShardkitError,
  type ShardkitGuard,
} from "./errors.js";
export { type Candidates, murmur3, prepareCandidates, rendezvous, shardHash } from "./hash.js";
export { MAX_GROUP, MAX_MEMBER, ShardIdentifier } from "./shard-identifier.js";
export { ShardedUUID } from "./sharded-uuid.js";
export { asId, type Id, ShardedId, type ShardSource } from "./typed-id.js";
