import type { ShardIdentifier } from "@shardkit/id";

/**
 * A field unique across shards (`models.User.unique: { email: true }`): each value is claimed by a
 * claim row placed by the hash of its canonical form, written before the row. How values are
 * compared is configurable; by default case is folded and Unicode normalized (NFKC).
 */
export interface UniqueField {
  /** Compare without case (full Unicode case folding after normalizing: `ß` is `ss`). Default true. */
  caseFold?: boolean;
  /** Unicode normalization form, or false. Default "NFKC". */
  normalize?: "NFC" | "NFD" | "NFKC" | "NFKD" | false;
  /** Replaces both: the canonical form of a value. */
  canonical?: (value: string) => string;
}

/** One field unique across shards, compiled. */
export interface UniqueSpec {
  model: string;
  field: string;
  scope: string;
  canonical(value: string): string;
}

/**
 * Full Unicode case folding, so that values equal but for case compare equal even where one
 * character's case is several (`ß`, `ẞ`, `SS` and `ss`; `ǅ`, `Ǆ` and `ǆ`; `ς`, `σ` and `Σ`):
 * lower, then upper (where `ß` becomes `SS`), then lower again (where `ẞ`'s lower form `ß` has
 * become `ss` too). `toLowerCase` alone keeps `straße` and `strasse` apart.
 */
export function foldCase(value: string): string {
  return value.toLowerCase().toUpperCase().toLowerCase();
}

/** The canonical form function of a field's options. */
export function canonicalOf(options: UniqueField | true): (value: string) => string {
  const o = options === true ? {} : options;
  if (o.canonical) return o.canonical;
  const form = o.normalize ?? "NFKC";
  const fold = o.caseFold ?? true;
  return (value) => {
    const normal = form ? value.normalize(form) : value;
    if (!fold) return normal;
    // Folding can undo a normalization (a decomposed letter's case pair): normalized once more.
    return form ? foldCase(normal).normalize(form) : foldCase(normal);
  };
}

/** Where the claim of one value of a field unique across shards lives. */
export interface ClaimKey {
  /** `Model.field` */
  scope: string;
  /** The canonical value. */
  value: string;
  /** The logical shard the claim is placed on (by the value's hash). */
  shard: ShardIdentifier;
}

/**
 * Where the claim of `value` (already canonical) lives: `hash` (the frozen hash over every logical
 * shard, `shardHash` of @shardkit/id) of `scope NUL value`.
 */
export function claimKey(
  spec: UniqueSpec,
  value: string,
  hash: (value: string) => ShardIdentifier,
): ClaimKey {
  return { scope: spec.scope, value, shard: hash(`${spec.scope}\u0000${value}`) };
}

/** A value to claim for a row: its claim's place, the value as the row stores it, and the row. */
export interface Claim extends ClaimKey {
  model: string;
  field: string;
  stored: string;
  /** The row that will hold the value: its shard and id. */
  ownerShard: ShardIdentifier;
  ownerId: string;
  /** The row's id field (to check that it holds the value). */
  idField: string;
}

/** A claim row as read from its database. */
export interface ClaimRecord {
  ownerShard: number;
  ownerId: string;
  stored: string;
  state: string;
  /** The write that took the claim ("" for claims written before tokens). */
  token: string;
}
