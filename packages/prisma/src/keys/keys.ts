// The routing options compiled once per routed client: each model's shard keys (one `ShardKey`
// each), where a new row goes (`place`) and its fields unique across shards. A call's keys are read by a
// `KeyReader`: first to gather the lookups the call needs (its resolve step), then to name its shards.
import { ShardedUUID, ShardIdentifier, shardHash } from "@shardkit/id";
import { UnsupportedShardOperationError } from "../errors.js";
import type { Obj } from "../plan.js";
import type { DataModel } from "../prisma-private.js";
import type { ShardRef } from "../registry.js";
import type { KeylessPolicy } from "../scatter/options.js";
import { idKey, type Lookup, type Resolved, routedKey, uniqueKey } from "../shard-key.js";
import type { Legacy, LegacyIds, RoutedKey } from "../strategies.js";
import { type Claim, canonicalOf, claimKey, type UniqueField, type UniqueSpec } from "../unique.js";
import { KeyReader } from "./key-reader.js";
import { type KeySchema, type ModelKeys, type Named, shardOfRef } from "./key-schema.js";

/** How one model is routed. */
export interface ModelRouting {
  /**
   * The fields that name the row's shard. A field name is a ShardedUUID field: its `id` and the
   * foreign keys of colocated parents (e.g. `["id", "customerId"]`). A model whose rows cannot
   * carry the shard in an ID is routed by another column: `byColumn(field, fn)` (the selector
   * fits), `byHash(field, shards)` or `byDirectory(field, directory)`. Default: `["id"]` when the
   * model has a String `id`, otherwise none (such a model is reached through `$shard` or a
   * transaction).
   */
  keys?: (string | RoutedKey)[];
  /** What keyless reads of this model do; overrides the extension's `keyless` (see `KeylessPolicy`). */
  keyless?: KeylessPolicy;
  /**
   * Where this model's rows with IDs that are not ShardedUUIDs (v4 UUIDs, cuids: rows from before
   * sharding) live; overrides the extension's `legacy`. `false`: none, such IDs are refused.
   */
  legacy?: LegacyIds | false;
  /**
   * The shard of a new row created without an ID and without another key that names its shard:
   * `(data) => selector.select(data)`. The router fills in a ShardedUUID on that shard. Nested
   * creates get IDs on their parent's shard without it.
   */
  place?: (data: Obj) => ShardRef;
  /**
   * Fields unique across shards (`{ email: true }` or `{ email: { caseFold, normalize, canonical } }`).
   * A plain `@unique` holds per shard only; these are enforced by claim rows (the `UniqueClaim`
   * model), and `where: { email }` routes by them.
   */
  unique?: Record<string, UniqueField | true>;
}

/** The options of the key reader that are not per model. */
export interface KeyOptions {
  /** Where rows whose IDs are not ShardedUUIDs live, for every model (see `ModelRouting.legacy`). */
  legacy?: LegacyIds | undefined;
  /** Makes the ID of a new row on a shard. Default `ShardedUUID.generate`. */
  generateId?: ((shard: ShardIdentifier) => string) | undefined;
  /** Every logical shard (claims are placed over them). */
  shards: readonly ShardIdentifier[];
}

/** What a call's keys are read in: a transaction's shard, the answers of its lookups. */
export interface KeyContext {
  within?: ShardIdentifier | undefined;
  /** The call's answers; the reading records in it the directory answers it finds cached. */
  resolved?: Resolved | undefined;
}

/** `OrderItem` -> `orderItem`: the delegate property of a model on a Prisma client. */
export function delegateKey(model: string): string {
  let key = delegateKeys.get(model);
  if (key === undefined) {
    key = model.charAt(0).toLowerCase() + model.slice(1);
    delegateKeys.set(model, key);
  }
  return key;
}
/** Computed once per model name: every routed call looks its delegate up by it. */
const delegateKeys = new Map<string, string>();

type Resolve = (shard: ShardIdentifier) => ShardIdentifier;

/** The answers of a call of a client none of whose keys can wait on a lookup: always empty. */
const NO_ANSWERS: Resolved = new Map();

/**
 * Every model's shard keys, compiled from the routing options (problems listed in `issues`), and
 * the two readings of a call: `lookups` (what must be fetched first) and `named` (its shards).
 */
export class KeyRouting implements KeySchema {
  readonly models = new Map<string, ModelKeys>();
  readonly relations = new Map<string, Map<string, string>>();
  readonly generate: (shard: ShardIdentifier) => string;
  readonly shards: readonly ShardIdentifier[];
  /** Whether any key can need a lookup (a directory, a field unique across shards). */
  readonly mayLookUp: boolean;
  private hashOfShards: ((value: string) => ShardIdentifier) | undefined;

  // Longer than 80 lines: every model's keys checked in one pass, each problem named.
  constructor(
    readonly dataModel: DataModel,
    readonly resolve: Resolve,
    models: Record<string, ModelRouting> = {},
    issues: string[] = [],
    options: KeyOptions = { shards: [] },
  ) {
    this.generate = options.generateId ?? ((shard) => ShardedUUID.generate(shard));
    this.shards = [...options.shards].sort((a, b) => a.bits - b.bits);
    const toShard = (ref: ShardRef) => resolve(shardOfRef(ref));
    const globalLegacy = legacyOf(options.legacy, "legacy", toShard, issues);
    for (const name of Object.keys(models)) {
      if (!dataModel.models[name]) issues.push(`models.${name}: no such model in the Prisma schema`);
    }
    let claims = false;
    let lookups = false;
    for (const [name, model] of Object.entries(dataModel.models)) {
      const routing = models[name] ?? {};
      const at = `models.${name}`;
      const legacy =
        routing.legacy === false
          ? undefined
          : routing.legacy !== undefined
            ? legacyOf(routing.legacy, `${at}.legacy`, toShard, issues)
            : globalLegacy;
      const idField = model.fields.id;
      const configured =
        routing.keys ?? (idField?.kind === "scalar" && idField.type === "String" ? ["id"] : []);
      const compiled: ModelKeys = {
        names: [],
        keys: [],
        fill: undefined,
        place: undefined,
        unique: new Map(),
        legacy,
      };
      for (const [i, key] of configured.entries()) {
        const field = typeof key === "string" ? key : key?.field;
        const spec = typeof field === "string" ? model.fields[field] : undefined;
        if (!spec) {
          issues.push(`${at}.keys: ${name} has no field ${String(field)}`);
          continue;
        }
        if (typeof key === "string") {
          if (spec.kind !== "scalar" || spec.type !== "String") {
            issues.push(
              `${at}.keys: ${name}.${key} is not a String scalar (a ShardedUUID is stored as a string/uuid)`,
            );
            continue;
          }
          compiled.keys.push(idKey(key, resolve, legacy));
          compiled.fill ??= key;
        } else {
          if (spec.kind !== "scalar" || !["String", "Int", "BigInt"].includes(spec.type)) {
            issues.push(`${at}.keys[${i}]: ${name}.${field} is not a String, Int or BigInt scalar`);
            continue;
          }
          const routed = routedKey(key, `${at}.keys[${i}]`, toShard, issues);
          if (routed) compiled.keys.push(routed);
          if (key.by === "directory") lookups = true;
        }
        compiled.names.push(field as string);
      }
      if (routing.place !== undefined) {
        if (typeof routing.place !== "function")
          issues.push(`${at}.place: expected a function (data) => shard`);
        else if (!compiled.fill) issues.push(`${at}.place: ${name} has no ShardedUUID key to fill in`);
        else compiled.place = routing.place;
      }
      for (const [field, options] of Object.entries(routing.unique ?? {})) {
        const spec = model.fields[field];
        if (spec?.kind !== "scalar" || spec.type !== "String") {
          issues.push(`${at}.unique.${field}: ${name} has no String field ${field}`);
        } else if (compiled.fill === undefined) {
          issues.push(
            `${at}.unique.${field}: ${name} must be routed by a ShardedUUID id (a claim names its row by id)`,
          );
        } else if (options !== true && (typeof options !== "object" || options === null)) {
          issues.push(`${at}.unique.${field}: expected true or { caseFold?, normalize?, canonical? }`);
        } else {
          const unique = { model: name, field, scope: `${name}.${field}`, canonical: canonicalOf(options) };
          compiled.unique.set(
            field,
            uniqueKey(unique, (v) => this.claimHash(v), resolve, legacy),
          );
          claims = true;
        }
      }
      this.models.set(name, compiled);
      const relations = new Map<string, string>();
      for (const [fieldName, field] of Object.entries(model.fields)) {
        if (field.kind === "object") relations.set(fieldName, field.type);
      }
      this.relations.set(name, relations);
    }
    const missing = ["UniqueClaim", "UniqueClaimToken"].filter((m) => !dataModel.models[m]);
    if (claims && missing.length > 0) {
      issues.push(
        `unique: fields unique across shards need the ${missing.join(" and ")} model${missing.length > 1 ? "s" : ""} of @shardkit/prisma/schema/shardkit.prisma in your schema`,
      );
    }
    this.mayLookUp = lookups || claims;
  }

  /**
   * The shards `model.operation(args)` names, with the arguments to run (IDs filled in). Throws (a
   * ShardkitError) on keys that disagree, nested writes that leave the parent's shard, malformed IDs
   * and unknown shards. Every lookup it needs must be answered in `context.resolved` (see `lookups`).
   */
  named(model: string, operation: string, args: Obj, context: KeyContext = {}): Named {
    // Without a key that can wait on a lookup, nothing is ever written to the answers: one empty map serves.
    const resolved = context.resolved ?? (this.mayLookUp ? new Map() : NO_ANSWERS);
    return new KeyReader(this, { within: context.within, resolved, gathering: false }).read(
      model,
      operation,
      args,
    );
  }

  /**
   * What must be fetched before `model.operation(args)` can be named: every directory answer and
   * claim row a decision waits on (a key another key made moot is not asked), found in one
   * reading, each once; none when no key can need one. Cached directory answers are recorded in
   * `context.resolved`, for the plan to use.
   */
  lookups(model: string, operation: string, args: Obj, context: KeyContext = {}): Lookup[] {
    if (!this.mayLookUp) return [];
    const reading = { within: context.within, resolved: context.resolved ?? new Map(), gathering: true };
    return new KeyReader(this, reading).gather(model, operation, args);
  }

  /** A field unique across shards by scope (`Model.field`), with its model's ShardedUUID id field. */
  uniqueSpec(scope: string): { unique: UniqueSpec; idField: string } | undefined {
    const [model, field] = scope.split(".") as [string, string];
    const spec = this.models.get(model);
    const key = spec?.unique.get(field);
    return key && spec?.fill ? { unique: key.unique, idField: spec.fill } : undefined;
  }

  /** The fields unique across shards of a model. */
  uniqueOf(model: string): readonly UniqueSpec[] {
    return [...(this.models.get(model)?.unique.values() ?? [])].map((k) => k.unique);
  }

  /** The frozen hash claims are placed with, over every logical shard (made on first use). */
  private claimHash(value: string): ShardIdentifier {
    this.hashOfShards ??= shardHash(this.shards);
    return this.hashOfShards(value);
  }

  /** The shard the claim of a canonical `value` of a unique field lives on. */
  claimShard(unique: UniqueSpec, value: string): ShardIdentifier {
    return claimKey(unique, value, (v) => this.claimHash(v)).shard;
  }

  /** The claim a row `ownerId` on `ownerShard` takes for the value `stored` of a unique field. */
  claimFor(unique: UniqueSpec, stored: string, ownerShard: ShardIdentifier, ownerId: string): Claim {
    return {
      ...claimKey(unique, unique.canonical(stored), (v) => this.claimHash(v)),
      model: unique.model,
      field: unique.field,
      stored,
      ownerShard,
      ownerId,
      idField: this.models.get(unique.model)!.fill!,
    };
  }

  /** The shard a row's ShardedUUID key value names (a legacy ID: its declared shard). */
  shardOfKey(model: string, field: string, value: unknown): ShardIdentifier {
    const key = this.models.get(model)!.keys.find((k) => k.field === field)!;
    const shard = key.shardOf(value, new Map());
    if (shard instanceof ShardIdentifier) return shard;
    throw new UnsupportedShardOperationError(`${model}.${field} is routed by a lookup, not by its value`);
  }

  /** The key fields of a model. */
  keysOf(model: string): readonly string[] {
    return this.models.get(model)?.names ?? [];
  }
}

function legacyOf(
  value: LegacyIds | undefined,
  at: string,
  toShard: (ref: ShardRef) => ShardIdentifier,
  issues: string[],
): Legacy | undefined {
  if (value === undefined) return undefined;
  try {
    if (value && typeof value === "object" && "shard" in value) {
      const before = value.uuidv7Before;
      if (before !== undefined && !(before instanceof Date && Number.isFinite(before.getTime()))) {
        issues.push(`${at}.uuidv7Before: expected a Date`);
      }
      return { shard: toShard(value.shard), before: before?.getTime() };
    }
    return { shard: toShard(value as ShardRef), before: undefined };
  } catch (error) {
    issues.push(`${at}: ${(error as Error).message}`);
    return undefined;
  }
}
