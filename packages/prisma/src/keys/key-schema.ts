// What reading a call's shard keys works from: each model's keys compiled from the routing options
// (keys.ts compiles them), and what a reading names (one shard, an `in` list, rows, none).
import { ShardIdentifier } from "@shardkit/id";
import type { Obj } from "../plan.js";
import type { ShardRef } from "../registry.js";
import type { Resolved, ShardKey, UniqueKey } from "../shard-key.js";
import type { Legacy } from "../strategies.js";
import type { Claim, UniqueSpec } from "../unique.js";

/** One model's keys, compiled. */
export interface ModelKeys {
  names: string[];
  keys: ShardKey[];
  /** The ShardedUUID field a create without it gets (the first ShardedUUID key). */
  fill: string | undefined;
  place: ((data: Obj) => ShardRef) | undefined;
  /** Fields unique across shards, by field. */
  unique: Map<string, UniqueKey>;
  legacy: Legacy | undefined;
}

/** Every model's keys and relations, compiled once per routed client. */
export interface KeySchema {
  readonly models: ReadonlyMap<string, ModelKeys>;
  /** model -> relation field -> related model */
  readonly relations: ReadonlyMap<string, ReadonlyMap<string, string>>;
  /** Every logical shard, by bits. */
  readonly shards: readonly ShardIdentifier[];
  /** The registered shard a shard names (the registry's unknown-shard policy applies). */
  resolve(shard: ShardIdentifier): ShardIdentifier;
  /** Makes the ID of a new row on a shard. */
  generate(shard: ShardIdentifier): string;
  /** The claim a row `ownerId` on `ownerShard` takes for the value `stored` of a unique field. */
  claimFor(unique: UniqueSpec, stored: string, ownerShard: ShardIdentifier, ownerId: string): Claim;
}

/**
 * What one reading of a call's arguments is made in. Its resolve step reads `gathering`: a key
 * whose lookup is not answered yet is listed, the reading goes on, and the lookups a decision needs
 * (no other key named the shard) are the call's. Its plan reads once they are answered.
 */
export interface Reading {
  /** Inside a transaction on this shard. */
  within: ShardIdentifier | undefined;
  /** The answers of the call's lookups. */
  resolved: Resolved;
  /** The resolve step's reading. */
  gathering: boolean;
}

/**
 * The shards an operation's arguments name, before anything is known of databases. `args`, when
 * set, replaces the call's arguments: IDs filled in, a `where` by a unique field made exact.
 */
export type Named =
  /** Every key names this shard. `claims`: values of fields unique across shards the write takes. */
  | { kind: "one"; shard: ShardIdentifier; args?: Obj; claims?: Claim[] }
  /** An `in` list on a key field (`where.field.in`), its values grouped by shard. */
  | { kind: "in"; field: string; byShard: Map<ShardIdentifier, unknown[]>; args?: Obj }
  /** createMany rows, grouped by shard. */
  | { kind: "rows"; byShard: Map<ShardIdentifier, unknown[]>; args?: Obj }
  /** No key: why, for the error or hint. */
  | { kind: "none"; hint: string; args?: Obj };

/** A key's value when it is given directly or as `{ set: value }`; undefined for filters. */
export function scalarValue(value: unknown): unknown {
  if (typeof value === "string" || typeof value === "number" || typeof value === "bigint") return value;
  if (value && typeof value === "object" && "set" in value && Object.keys(value).length === 1) {
    return (value as Obj).set;
  }
  return undefined;
}

/** A ShardIdentifier from a shard ref ("1/5", `{ group, member }`, a ShardIdentifier). */
export function shardOfRef(ref: ShardRef): ShardIdentifier {
  if (ref instanceof ShardIdentifier) return ref;
  if (typeof ref === "string") return ShardIdentifier.parse(ref);
  if (ref && typeof ref === "object" && "group" in ref && "member" in ref)
    return ShardIdentifier.of(ref.group, ref.member);
  return ShardIdentifier.parse(ref as unknown as string); // throws with the value in its message
}
