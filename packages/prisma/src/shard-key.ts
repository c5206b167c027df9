// The one interface every way of routing a key implements (the role of Vitess's Vindex): a
// ShardedUUID id, `byColumn`, `byHash`, `byDirectory` and a field unique across shards each map a
// value to its shard, or name the lookup that must be answered first. None of them does I/O: a
// call's lookups are fetched in one batch by its resolve step, before it is planned.
import { InvalidShardedIdError, ShardedUUID, ShardIdentifier, shardHash } from "@shardkit/id";
import { UnsupportedShardOperationError } from "./errors.js";
import type { ShardRef } from "./registry.js";
import { DirectoryCache, type Legacy, type RoutedKey } from "./strategies.js";
import { type ClaimKey, type ClaimRecord, claimKey, type UniqueSpec } from "./unique.js";

/** Something to fetch before a call can be planned: a directory's answer, or a claim row. */
export type Lookup =
  /** A directory's answer. */
  | { id: string; run(): Promise<unknown>; claim?: undefined }
  /** The claim row of a value of a field unique across shards (read by the executor). */
  | { id: string; claim: ClaimKey; run?: undefined };

/**
 * The answers of one call's lookups, by `Lookup.id`. A key also records here a directory answer it
 * found in its cache, so a call is planned with the answers it was resolved with.
 */
export type Resolved = Map<string, unknown>;

/** How a key field names the shard of a row. */
export interface ShardKey {
  readonly field: string;
  /**
   * The shard `value` names, or the lookup to answer into `resolved` first. Throws a ShardkitError
   * for a value that names no shard (malformed, unknown, not in the directory).
   */
  shardOf(value: unknown, resolved: Resolved): ShardIdentifier | Lookup;
}

/** A field unique across shards, as a key: its claim names the row's shard. */
export interface UniqueKey extends ShardKey {
  readonly unique: UniqueSpec;
  /** The claim of a value, once resolved: the row's ID and the value as stored; null when none holds it. */
  claimOf(value: string, resolved: Resolved): ClaimRecord | null;
}

type Resolve = (shard: ShardIdentifier) => ShardIdentifier;

/** A UUID (any case) whose version is not 7. */
const UUID_OF_ANOTHER_VERSION = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-689a-f][0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A ShardedUUID key: the shard is in the ID; legacy IDs go to their declared shard. */
export function idKey(field: string, resolve: Resolve, legacy: Legacy | undefined): ShardKey {
  if (!legacy) {
    return {
      field,
      shardOf(value) {
        try {
          return resolve(ShardedUUID.shardOf(value as string));
        } catch (error) {
          // A UUID of another version (an ID made before sharding): the error says how to route it.
          if (typeof value === "string" && UUID_OF_ANOTHER_VERSION.test(value))
            throw new InvalidShardedIdError(
              value,
              `version is ${value[14]}, expected 7: an ID made before sharding is routed only to a shard you name for such IDs, with the extension's \`legacy\` option (every model) or \`models.<Model>.legacy\``,
            );
          throw error;
        }
      },
    };
  }
  const { shard, before } = legacy;
  return {
    field,
    shardOf(value) {
      if (ShardedUUID.isValid(value) && (before === undefined || ShardedUUID.timestampOf(value) >= before)) {
        return resolve(ShardedUUID.shardOf(value));
      }
      if (typeof value === "string" && value.length > 0) return shard;
      return resolve(ShardedUUID.shardOf(value as string)); // throws InvalidShardedIdError
    },
  };
}

/** The key of a `byColumn`, `byHash` or `byDirectory` option; `issues` collects what is wrong with it. */
export function routedKey(
  key: RoutedKey,
  at: string,
  resolve: (shard: ShardRef) => ShardIdentifier,
  issues: string[],
): ShardKey | undefined {
  const field = key.field;
  switch (key.by) {
    case "column": {
      if (typeof key.shardOf !== "function") {
        issues.push(`${at}.shardOf: expected a function (value) => shard`);
        return undefined;
      }
      return { field, shardOf: (value) => resolve(key.shardOf(value)) };
    }
    case "hash": {
      const shards: ShardIdentifier[] = [];
      for (const [i, ref] of (Array.isArray(key.shards) ? key.shards : []).entries()) {
        try {
          shards.push(resolve(ref));
        } catch (error) {
          issues.push(`${at}.shards[${i}]: ${(error as Error).message}`);
        }
      }
      if (shards.length === 0) {
        issues.push(`${at}.shards: expected at least one registered shard`);
        return undefined;
      }
      if (new Set(shards).size !== shards.length) issues.push(`${at}.shards: a shard is listed twice`);
      const hashed = shardHash(shards);
      return { field, shardOf: (value) => hashed(text(value)) };
    }
    case "directory": {
      if (typeof key.directory?.lookup !== "function") {
        issues.push(`${at}.directory.lookup: expected a function (value) => shard`);
        return undefined;
      }
      const cache = new DirectoryCache(key.directory, key.field, resolve);
      const prefix = `directory:${at}:`;
      return {
        field,
        shardOf(value, resolved) {
          const v = text(value);
          const id = prefix + v;
          const answered = resolved.get(id) as ShardIdentifier | undefined;
          if (answered !== undefined) return answered;
          const fresh = cache.fresh(v);
          if (fresh === undefined) return { id, run: () => cache.lookup(v) };
          resolved.set(id, fresh);
          return fresh;
        },
      };
    }
    default:
      issues.push(`${at}: expected a field name or byColumn(...), byHash(...) or byDirectory(...)`);
      return undefined;
  }
}

/**
 * A field unique across shards: a value's claim (placed by `placeClaim`) names the shard of the row
 * holding it. No claim: the legacy shard (rows from before the claims), else the claim's own shard
 * (where no row holds the value).
 */
export function uniqueKey(
  unique: UniqueSpec,
  placeClaim: (value: string) => ShardIdentifier,
  resolve: Resolve,
  legacy: Legacy | undefined,
): UniqueKey {
  const lookupOf = (raw: string): Extract<Lookup, { claim: ClaimKey }> => {
    const claim = claimKey(unique, unique.canonical(raw), placeClaim);
    return { id: `claim:${claim.scope}\u0000${claim.value}`, claim };
  };
  return {
    field: unique.field,
    unique,
    shardOf(value, resolved) {
      const lookup = lookupOf(value as string);
      if (!resolved.has(lookup.id)) return lookup;
      const record = resolved.get(lookup.id) as ClaimRecord | null;
      if (!record) return legacy?.shard ?? resolve(lookup.claim.shard);
      return resolve(ShardIdentifier.fromBits(record.ownerShard));
    },
    claimOf(value, resolved) {
      return (resolved.get(lookupOf(value).id) as ClaimRecord | null | undefined) ?? null;
    },
  };
}

function text(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  throw new UnsupportedShardOperationError(
    `a routed key value must be a string or a number, got ${typeof value}`,
  );
}
