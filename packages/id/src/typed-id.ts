import { InvalidShardedIdError } from "./errors.js";
import { ShardIdentifier } from "./shard-identifier.js";
import { ShardedUUID } from "./sharded-uuid.js";

declare const idModel: unique symbol;
declare const sharded: unique symbol;

/** An ID of `Model`, branded so a customer ID cannot be passed where a wallet ID is expected. */
export type Id<Model extends string> = string & { readonly [idModel]: Model };

/** An ID of `Model` that is a ShardedUUID: it names its shard. Usable wherever `Id<Model>` is. */
export type ShardedId<Model extends string> = Id<Model> & { readonly [sharded]: true };

/** Anything that can name a shard: the shard itself or an ID that carries it. */
export type ShardSource = ShardIdentifier | ShardedId<string> | string;

function shardFrom(source: ShardSource): ShardIdentifier {
  return source instanceof ShardIdentifier ? source : ShardedUUID.shardOf(source);
}

export const ShardedId = {
  /** A new ID of `model` on `shard`. */
  generate<Model extends string>(model: Model, shard: ShardIdentifier): ShardedId<Model> {
    void model;
    return ShardedUUID.generate(shard) as ShardedId<Model>;
  },

  /**
   * A new ID of `model` on the shard that `other` names: how child rows (a customer's wallets)
   * are colocated with their parent. Throws `InvalidShardedIdError` if `other` is not a sharded ID.
   */
  colocatedWith<Model extends string>(model: Model, other: ShardSource): ShardedId<Model> {
    void model;
    return ShardedUUID.generate(shardFrom(other)) as ShardedId<Model>;
  },

  /** Checks `value` is a canonical v7 UUID and brands it; throws `InvalidShardedIdError` otherwise. */
  parse<Model extends string>(model: Model, value: unknown): ShardedId<Model> {
    if (!ShardedUUID.isValid(value)) {
      ShardedUUID.shardOf(value as string); // throws with the precise reason
      throw new InvalidShardedIdError(value, `not a ${model} ID`);
    }
    return value as ShardedId<Model>;
  },

  /** The shard an ID names. */
  shardOf(id: ShardedId<string> | string): ShardIdentifier {
    return ShardedUUID.shardOf(id);
  },
} as const;

/** Brands a plain (unsharded) ID without checking its format: for IDs from a trusted source. */
export function asId<Model extends string>(model: Model, value: string): Id<Model> {
  void model;
  return value as Id<Model>;
}
