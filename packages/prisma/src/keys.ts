import { ShardedUUID, ShardIdentifier, shardHash } from "@shardkit/id";
import { CrossShardError, ShardKeyRequiredError, UnsupportedShardOperationError } from "./errors.js";
import type { DataModel } from "./internals.js";
import type { Obj } from "./plan.js";
import type { ShardRef } from "./registry.js";
import type { KeylessPolicy } from "./scatter/options.js";
import {
  idShardOf,
  type Legacy,
  type LegacyIds,
  type Lookup,
  NeedsLookup,
  type Resolved,
  type RoutedKey,
  routedShardOf,
  type ShardOfValue,
} from "./strategies.js";
import {
  type Claim,
  type ClaimRecord,
  canonicalOf,
  claimKey,
  type UniqueField,
  type UniqueSpec,
} from "./unique.js";

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

/** One model's keys, compiled. */
interface ModelKeys {
  names: string[];
  keys: { field: string; shardOf: ShardOfValue }[];
  /** The ShardedUUID field a create without it gets (the first ShardedUUID key). */
  fill: string | undefined;
  place: ((data: Obj) => ShardRef) | undefined;
  unique: Map<string, UniqueSpec>;
  legacy: Legacy | undefined;
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

/** What a call is planned in: a transaction's shard, the answers of its lookups. */
export interface KeyContext {
  within?: ShardIdentifier | undefined;
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

type Found = { field: string; shard: ShardIdentifier };

type Resolve = (shard: ShardIdentifier) => ShardIdentifier;

/** Operations routed by their top-level `where`. */
export const WHERE_OPERATIONS = new Set([
  "findUnique",
  "findUniqueOrThrow",
  "findFirst",
  "findFirstOrThrow",
  "findMany",
  "update",
  "updateMany",
  "updateManyAndReturn",
  "delete",
  "deleteMany",
  "count",
  "aggregate",
  "groupBy",
]);

/** Writes that cannot take claims of fields unique across shards (several rows, or a create that may not happen). */
const NO_CLAIMS = new Set([
  "createMany",
  "createManyAndReturn",
  "upsert",
  "updateMany",
  "updateManyAndReturn",
]);

/**
 * Reads shard keys out of Prisma arguments: which shard(s) `where` / `data` name, and whether
 * nested writes stay on the parent's shard; fills in the IDs of new rows. Knows nothing of
 * databases or of Prisma's client.
 */
export class KeyRouting {
  private readonly models = new Map<string, ModelKeys>();
  /** model -> relation field -> related model */
  private readonly relations = new Map<string, Map<string, string>>();
  private readonly generate: (shard: ShardIdentifier) => string;
  private readonly shards: readonly ShardIdentifier[];
  private hashOfShards: ((value: string) => ShardIdentifier) | undefined;
  /** The context of the call being read (set for the duration of one synchronous `named`). */
  private context: KeyContext = {};

  constructor(
    readonly dataModel: DataModel,
    private readonly resolve: Resolve,
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
          compiled.keys.push({ field: key, shardOf: idShardOf(resolve, legacy) });
          compiled.fill ??= key;
        } else {
          if (spec.kind !== "scalar" || !["String", "Int", "BigInt"].includes(spec.type)) {
            issues.push(`${at}.keys[${i}]: ${name}.${field} is not a String, Int or BigInt scalar`);
            continue;
          }
          const shardOf = routedShardOf(key, `${at}.keys[${i}]`, toShard, issues);
          if (shardOf) compiled.keys.push({ field: field as string, shardOf });
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
          compiled.unique.set(field, {
            model: name,
            field,
            scope: `${name}.${field}`,
            canonical: canonicalOf(options),
          });
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
  }

  /** A field unique across shards by scope (`Model.field`), with its model's ShardedUUID id field. */
  uniqueSpec(scope: string): { unique: UniqueSpec; idField: string } | undefined {
    const [model, field] = scope.split(".") as [string, string];
    const spec = this.models.get(model);
    const unique = spec?.unique.get(field);
    return unique && spec?.fill ? { unique, idField: spec.fill } : undefined;
  }

  /** The fields unique across shards of a model. */
  uniqueOf(model: string): readonly UniqueSpec[] {
    return [...(this.models.get(model)?.unique.values() ?? [])];
  }

  /** The frozen hash claims are placed with, over every logical shard (made on first use). */
  private get claimHash(): (value: string) => ShardIdentifier {
    this.hashOfShards ??= shardHash(this.shards);
    return this.hashOfShards;
  }

  /** The shard the claim of a canonical `value` of a unique field lives on. */
  claimShard(unique: UniqueSpec, value: string): ShardIdentifier {
    return claimKey(unique, value, this.claimHash).shard;
  }

  /** The claim a row `ownerId` on `ownerShard` takes for the value `stored` of a unique field. */
  claimFor(unique: UniqueSpec, stored: string, ownerShard: ShardIdentifier, ownerId: string): Claim {
    return {
      ...claimKey(unique, unique.canonical(stored), this.claimHash),
      model: unique.model,
      field: unique.field,
      stored,
      ownerShard,
      ownerId,
      idField: this.models.get(unique.model)!.fill!,
    };
  }

  /** The shard a row's key value names (a ShardedUUID, or a legacy ID on its declared shard). */
  shardOfKey(model: string, field: string, value: unknown): ShardIdentifier {
    return this.shardOf(model, field, value);
  }

  /** The key fields of a model. */
  keysOf(model: string): readonly string[] {
    return this.models.get(model)?.names ?? [];
  }

  /**
   * The shards `model.operation(args)` names, with the arguments to run (IDs filled in). Throws (a
   * ShardkitError) on keys that disagree, nested writes that leave the parent's shard, malformed IDs
   * and unknown shards; throws `NeedsLookup` when a key's shard is in a directory or a claim.
   */
  named(model: string, operation: string, args: Obj, context: KeyContext = {}): Named {
    const previous = this.context;
    this.context = context;
    try {
      return this.read(model, operation, args);
    } finally {
      this.context = previous;
    }
  }

  private read(model: string, operation: string, args: Obj): Named {
    const within = this.context.within;
    const spec = this.models.get(model);
    if (spec && spec.unique.size > 0 && NO_CLAIMS.has(operation)) this.refuseClaims(spec, operation, args);
    let named: Named;
    switch (operation) {
      case "create": {
        const data = (args.data ?? {}) as Obj;
        const found = this.fromData(model, data, operation);
        const shard = found.kind === "one" ? found.shard : this.placeNew(model, data, operation);
        if (shard === undefined) return found;
        const filled = this.fillRow(model, data, shard, true, "data");
        named = { kind: "one", shard };
        if (filled !== data) named.args = { ...args, data: filled };
        const claims = this.claimsOf(model, filled, shard, filled[spec?.fill ?? "id"]);
        if (claims.length > 0) named.claims = claims;
        break;
      }
      case "createMany":
      case "createManyAndReturn":
        return this.rows(model, operation, args);
      case "upsert": {
        const where = this.withArgs(this.fromWhere(model, args.where, operation), args);
        const data = this.fromData(model, args.create, operation);
        named =
          where.kind === "one" && data.kind === "one"
            ? this.agree(model, operation, [
                { field: "where", shard: where.shard },
                { field: "create", shard: data.shard },
              ])
            : where.kind === "one"
              ? where
              : data.kind === "one"
                ? data
                : within
                  ? { kind: "one", shard: within }
                  : where;
        if (named.kind === "one") {
          const shard = named.shard;
          const base = where.args ?? args;
          const create = this.fillRow(model, base.create as Obj, shard, true, "create");
          const update = this.fillRow(model, base.update as Obj, shard, false, "update");
          named = { kind: "one", shard };
          if (base !== args || create !== base.create || update !== base.update) {
            named.args = { ...base, create, update };
          }
        }
        break;
      }
      default: {
        if (!WHERE_OPERATIONS.has(operation)) {
          return { kind: "none", hint: `${operation} is not routed by key; run it with $shard(...)` };
        }
        named = this.withArgs(this.fromWhere(model, args.where, operation), args);
        const shard = named.kind === "one" ? named.shard : named.kind === "none" ? within : undefined;
        const base = named.args ?? args;
        if (shard && base.data && typeof base.data === "object") {
          const data = this.fillRow(model, base.data as Obj, shard, false, "data");
          if (data !== base.data) named = { ...named, args: { ...base, data } };
          if (named.kind === "one" && operation === "update") {
            const claims = this.claimsOf(model, data, shard, this.idOf(model, base.where));
            if (claims.length > 0) named.claims = claims;
          }
        }
      }
    }
    const run = named.args ?? args;
    if (named.kind === "one") this.checkWrite(model, operation, run, named.shard);
    else if (named.kind === "in")
      for (const shard of named.byShard.keys()) this.checkWrite(model, operation, run, shard);
    return named;
  }

  /**
   * Checks that what a write puts in `data` stays on `shard`: key fields (foreign keys included)
   * and nested creates, connects, upserts, updates and deletes. Throws `CrossShardError`.
   */
  checkWrite(model: string, operation: string, args: Obj, shard: ShardIdentifier): void {
    switch (operation) {
      case "create":
      case "update":
      case "updateMany":
      case "updateManyAndReturn":
        this.checkData(model, args.data, shard, `${model}.${operation}`);
        break;
      case "upsert":
        this.checkData(model, args.create, shard, `${model}.${operation}`);
        this.checkData(model, args.update, shard, `${model}.${operation}`);
        break;
    }
  }

  private shardOf(model: string, field: string, value: unknown): ShardIdentifier {
    const key = this.models.get(model)!.keys.find((k) => k.field === field)!;
    return key.shardOf(value, this.context.resolved);
  }

  /** The shard of a new row that names none: the transaction's, the model's placement, or the only shard. */
  private placeNew(model: string, data: Obj, operation: string): ShardIdentifier | undefined {
    const spec = this.models.get(model);
    if (!spec?.fill) return undefined;
    if (this.context.within) return this.context.within;
    if (spec.place) return this.resolve(shardOfRef(spec.place(data)));
    if (this.shards.length === 1) return this.shards[0];
    throw new ShardKeyRequiredError(
      model,
      operation,
      `data has none of its key fields (${spec.names.join(", ")}) and ${model} has no placement: give data.${spec.fill} (ShardedId.generate / ShardedId.colocatedWith), or models.${model}.place: (data) => shard`,
    );
  }

  /**
   * `data` with a ShardedUUID on `shard` for a new row (`create`) without one, and for every
   * nested create under it, however deep (copied where anything is added).
   */
  private fillRow(model: string, data: Obj, shard: ShardIdentifier, create: boolean, at: string): Obj {
    if (!data || typeof data !== "object") return data;
    const spec = this.models.get(model);
    let out = data;
    const set = (field: string, value: unknown) => {
      if (out === data) out = { ...data };
      out[field] = value;
    };
    if (create && spec?.fill && data[spec.fill] === undefined) set(spec.fill, this.generate(shard));
    const relations = this.relations.get(model);
    if (!relations) return out;
    for (const [field, value] of Object.entries(data)) {
      const related = relations.get(field);
      if (related === undefined || !value || typeof value !== "object") continue;
      const label = `${at}.${field}`;
      let ops = value as Obj;
      const setOp = (op: string, next: unknown) => {
        if (ops === value) ops = { ...(value as Obj) };
        ops[op] = next;
      };
      for (const [op, item] of Object.entries(value as Obj)) {
        const each = (fn: (x: Obj) => Obj) => {
          const next = Array.isArray(item) ? item.map((x) => fn(x as Obj)) : fn(item as Obj);
          if (Array.isArray(item) ? (next as Obj[]).some((x, i) => x !== item[i]) : next !== item)
            setOp(op, next);
        };
        const nested = (row: Obj, isCreate: boolean) => {
          this.refuseNestedClaims(related, row, `${label}.${op}`);
          return this.fillRow(related, row, shard, isCreate, `${label}.${op}`);
        };
        switch (op) {
          case "create":
            each((row) => nested(row, true));
            break;
          case "createMany":
            each((it) => {
              const rows = it?.data;
              if (!rows) return it;
              const next = Array.isArray(rows)
                ? rows.map((r) => nested(r as Obj, true))
                : nested(rows as Obj, true);
              return { ...it, data: next };
            });
            break;
          case "connectOrCreate":
            each((it) => ({ ...it, create: nested((it?.create ?? {}) as Obj, true) }));
            break;
          case "upsert":
            each((it) => ({
              ...it,
              create: nested((it?.create ?? {}) as Obj, true),
              update: nested((it?.update ?? {}) as Obj, false),
            }));
            break;
          case "update":
          case "updateMany":
            each((it) =>
              structuredUpdate(it)
                ? { ...it, data: nested((it.data ?? {}) as Obj, false) }
                : nested(it, false),
            );
            break;
        }
      }
      if (ops !== value) set(field, ops);
    }
    return out;
  }

  /** A `where` made exact (by a unique field's claim) in the call's whole arguments. */
  private withArgs(named: Named, args: Obj): Named {
    return named.args ? { ...named, args: { ...args, ...named.args } } : named;
  }

  /** The claims a write of `data` to `model` on `shard` takes for its row `ownerId`. */
  private claimsOf(model: string, data: Obj, shard: ShardIdentifier, ownerId: unknown): Claim[] {
    const spec = this.models.get(model);
    if (!spec || spec.unique.size === 0) return [];
    const claims: Claim[] = [];
    for (const unique of spec.unique.values()) {
      const stored = scalarValue(data[unique.field]);
      if (typeof stored !== "string") continue;
      if (typeof ownerId !== "string") {
        throw new UnsupportedShardOperationError(
          `${model}: setting ${unique.field} (unique across shards) needs the row named by ${spec.fill} in where, so that its claim names the row`,
        );
      }
      claims.push(this.claimFor(unique, stored, shard, ownerId));
    }
    return claims;
  }

  private refuseClaims(spec: ModelKeys, operation: string, args: Obj): void {
    const rows = [args.data, args.create, args.update].flatMap((d) => (Array.isArray(d) ? d : [d]));
    for (const unique of spec.unique.values()) {
      if (rows.some((row) => row && typeof row === "object" && (row as Obj)[unique.field] !== undefined)) {
        throw new UnsupportedShardOperationError(
          `${unique.scope} is unique across shards and ${operation} cannot claim it: use create or update (one row, one claim)`,
        );
      }
    }
  }

  private refuseNestedClaims(model: string, data: Obj, at: string): void {
    const spec = this.models.get(model);
    if (!spec || !data || typeof data !== "object") return;
    for (const unique of spec.unique.values()) {
      if (data[unique.field] !== undefined) {
        throw new UnsupportedShardOperationError(
          `${at}: ${unique.scope} is unique across shards and a nested write cannot claim it; write the ${model} with its own create or update`,
        );
      }
    }
  }

  /** The row ID a `where` names by equality on the model's ShardedUUID field. */
  private idOf(model: string, where: unknown): unknown {
    const field = this.models.get(model)?.fill;
    if (!field || !where || typeof where !== "object") return undefined;
    const condition = (where as Obj)[field];
    return typeof condition === "string" ? condition : undefined;
  }

  private fromData(model: string, data: unknown, operation: string): Named {
    const keys = this.keysOf(model);
    if (keys.length === 0)
      return { kind: "none", hint: `${model} has no shard key fields; run it with $shard(...)` };
    const found: Found[] = [];
    const pending: Lookup[] = [];
    if (data && typeof data === "object") {
      for (const key of keys) {
        const value = scalarValue((data as Obj)[key]);
        if (value !== undefined) this.found(model, key, value, found, pending);
      }
    }
    if (found.length === 0 && pending.length > 0) throw new NeedsLookup(pending);
    if (found.length === 0) {
      return {
        kind: "none",
        hint: `data has none of its key fields (${keys.join(", ")}); generate the ID with ShardedId.generate or ShardedId.colocatedWith`,
      };
    }
    return this.agree(model, operation, found);
  }

  /** Reads one key value into `found`, or its lookup into `pending`. */
  private found(model: string, field: string, value: unknown, found: Found[], pending: Lookup[]): void {
    try {
      found.push({ field, shard: this.shardOf(model, field, value) });
    } catch (error) {
      if (!(error instanceof NeedsLookup)) throw error;
      pending.push(...error.lookups);
    }
  }

  private fromWhere(model: string, where: unknown, operation: string): Named {
    const keys = this.keysOf(model);
    const eq: Found[] = [];
    const pending: Lookup[] = [];
    const inList =
      keys.length > 0 ? this.collect(model, keys, where, true, eq, pending, undefined) : undefined;
    if (eq.length > 0) return this.agree(model, operation, eq);
    if (pending.length > 0) throw new NeedsLookup(pending);
    if (inList) {
      const { field, values } = inList;
      const byShard = new Map<ShardIdentifier, unknown[]>();
      for (const value of values) {
        try {
          push(byShard, this.shardOf(model, field, value), value);
        } catch (error) {
          if (!(error instanceof NeedsLookup)) throw error;
          pending.push(...error.lookups);
        }
      }
      if (pending.length > 0) throw new NeedsLookup(pending);
      if (byShard.size === 0) return { kind: "none", hint: `where.${field}.in is empty` };
      if (byShard.size === 1) return { kind: "one", shard: byShard.keys().next().value! };
      return { kind: "in", field, byShard };
    }
    const unique = this.byUnique(model, where);
    if (unique) return unique;
    if (keys.length === 0)
      return { kind: "none", hint: `${model} has no shard key fields; run it with $shard(...)` };
    return { kind: "none", hint: `where has no equality or \`in\` on its key fields (${keys.join(", ")})` };
  }

  /**
   * A `where` by equality on a field unique across shards: the shard its claim names, with the
   * `where` made exact (the row's ID and the value as stored). No claim: the legacy shard (rows from
   * before the claims), else the claim's own shard (where no row holds the value).
   */
  private byUnique(model: string, where: unknown): Named | undefined {
    const spec = this.models.get(model);
    if (!spec || spec.unique.size === 0 || this.context.within || !where || typeof where !== "object") {
      return undefined;
    }
    for (const unique of spec.unique.values()) {
      const condition = (where as Obj)[unique.field];
      const raw =
        typeof condition === "string"
          ? condition
          : condition && typeof condition === "object" && Object.keys(condition).length === 1
            ? (condition as Obj).equals
            : undefined;
      if (typeof raw !== "string") continue;
      const key = claimKey(unique, unique.canonical(raw), this.claimHash);
      const id = `claim:${key.scope}\u0000${key.value}`;
      const resolved = this.context.resolved;
      if (!resolved?.has(id)) throw new NeedsLookup([{ id, claim: key }]);
      const record = resolved.get(id) as ClaimRecord | null;
      if (!record) return { kind: "one", shard: spec.legacy?.shard ?? this.resolve(key.shard) };
      return {
        kind: "one",
        shard: this.resolve(ShardIdentifier.fromBits(record.ownerShard)),
        args: { where: { ...(where as Obj), [unique.field]: record.stored, [spec.fill!]: record.ownerId } },
      };
    }
    return undefined;
  }

  /** Equalities on key fields (top level and inside AND) into `eq`; the first top-level `in` list. */
  private collect(
    model: string,
    keys: readonly string[],
    where: unknown,
    top: boolean,
    eq: Found[],
    pending: Lookup[],
    inList: { field: string; values: unknown[] } | undefined,
  ): { field: string; values: unknown[] } | undefined {
    if (!where || typeof where !== "object") return inList;
    const obj = where as Obj;
    for (const key of keys) {
      const condition = obj[key];
      const value = scalarValue(condition);
      if (value !== undefined) {
        this.found(model, key, value, eq, pending);
      } else if (condition && typeof condition === "object") {
        const c = condition as Obj;
        if (c.equals !== undefined) this.found(model, key, c.equals, eq, pending);
        else if (Array.isArray(c.in) && top && !inList) inList = { field: key, values: c.in };
      }
    }
    const and = obj.AND;
    if (Array.isArray(and))
      for (const part of and) inList = this.collect(model, keys, part, false, eq, pending, inList);
    else if (and && typeof and === "object")
      inList = this.collect(model, keys, and, false, eq, pending, inList);
    return inList;
  }

  private rows(model: string, operation: string, args: Obj): Named {
    const rows = Array.isArray(args.data) ? args.data : args.data === undefined ? [] : [args.data];
    const byShard = new Map<ShardIdentifier, unknown[]>();
    const filled: Obj[] = [];
    let changed = false;
    for (const [i, row] of rows.entries()) {
      const at = `${operation} data[${i}]`;
      const named = this.fromData(model, row, at);
      const shard = named.kind === "one" ? named.shard : this.placeNew(model, (row ?? {}) as Obj, at);
      if (shard === undefined) {
        throw new ShardKeyRequiredError(model, at, named.kind === "none" ? named.hint : "");
      }
      const next = this.fillRow(model, row as Obj, shard, true, `data[${i}]`);
      if (next !== row) changed = true;
      filled.push(next);
      push(byShard, shard, next);
    }
    const out = changed ? { ...args, data: Array.isArray(args.data) ? filled : filled[0] } : undefined;
    if (byShard.size === 0) return { kind: "none", hint: `${operation} with no rows` };
    if (byShard.size === 1) {
      const one: Named = { kind: "one", shard: byShard.keys().next().value! };
      if (out) one.args = out;
      return one;
    }
    return { kind: "rows", byShard, ...(out ? { args: out } : {}) };
  }

  private agree(model: string, operation: string, found: Found[]): Named {
    const first = found[0]!;
    for (const other of found) {
      if (other.shard !== first.shard) {
        throw new CrossShardError(
          `${model}.${operation}: keys disagree: ${first.field} names shard ${first.shard.key}, ${other.field} names shard ${other.shard.key}`,
          [first.shard, other.shard],
        );
      }
    }
    return { kind: "one", shard: first.shard };
  }

  /**
   * Nested writes run on the parent's shard: every key field in `data` (foreign keys included),
   * and every key named by a nested create, connect, connectOrCreate, update, upsert, delete or
   * set, must name `shard`.
   */
  private checkData(model: string, data: unknown, shard: ShardIdentifier, label: string): void {
    if (!data || typeof data !== "object") return;
    const keys = this.keysOf(model);
    const relations = this.relations.get(model);
    for (const [field, value] of Object.entries(data as Obj)) {
      const related = relations?.get(field);
      if (related !== undefined) {
        this.checkNested(related, value, shard, `${label} ${field}`);
      } else if (keys.includes(field)) {
        const key = scalarValue(value);
        if (key !== undefined) this.expectShard(model, field, key, shard, label);
      }
    }
  }

  private checkNested(model: string, ops: unknown, shard: ShardIdentifier, label: string): void {
    if (!ops || typeof ops !== "object") return;
    for (const [op, value] of Object.entries(ops as Obj)) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (!item || typeof item !== "object") continue;
        const it = item as Obj;
        const at = `${label}.${op}`;
        switch (op) {
          case "create":
            this.checkData(model, it, shard, at);
            break;
          case "createMany":
            for (const row of Array.isArray(it.data) ? it.data : [it.data])
              this.checkData(model, row, shard, at);
            break;
          case "connectOrCreate":
            this.checkWhere(model, it.where, shard, at);
            this.checkData(model, it.create, shard, at);
            break;
          case "upsert":
            this.checkWhere(model, it.where, shard, at);
            this.checkData(model, it.create, shard, at);
            this.checkData(model, it.update, shard, at);
            break;
          case "update":
          case "updateMany": {
            if (structuredUpdate(it)) {
              this.checkWhere(model, it.where, shard, at);
              this.checkData(model, it.data, shard, at);
            } else {
              this.checkData(model, it, shard, at);
            }
            break;
          }
          default: // connect, set, disconnect, delete, deleteMany: unique or filter inputs
            this.checkWhere(model, it, shard, at);
        }
      }
    }
  }

  private checkWhere(model: string, where: unknown, shard: ShardIdentifier, label: string): void {
    if (!where || typeof where !== "object") return;
    for (const key of this.keysOf(model)) {
      const condition = (where as Obj)[key];
      const value = scalarValue(condition);
      if (value !== undefined) this.expectShard(model, key, value, shard, label);
      else if (condition && typeof condition === "object") {
        const c = condition as Obj;
        if (c.equals !== undefined) this.expectShard(model, key, c.equals, shard, label);
        if (Array.isArray(c.in)) for (const v of c.in) this.expectShard(model, key, v, shard, label);
      }
    }
  }

  private expectShard(
    model: string,
    field: string,
    value: unknown,
    shard: ShardIdentifier,
    label: string,
  ): void {
    const named = this.shardOf(model, field, value);
    if (named !== shard) {
      throw new CrossShardError(
        `${label}: ${model}.${field} names shard ${named.key}, but the operation runs on shard ${shard.key} (nested writes stay on the parent's shard)`,
        [shard, named],
      );
    }
  }
}

/** A nested `update: { where, data }` (as opposed to `update: data` of a to-one relation). */
function structuredUpdate(it: Obj): boolean {
  return "data" in it && Object.keys(it).every((k) => k === "data" || k === "where");
}

/** A ShardIdentifier from a shard ref ("1/5", `{ group, member }`, a ShardIdentifier). */
export function shardOfRef(ref: ShardRef): ShardIdentifier {
  if (ref instanceof ShardIdentifier) return ref;
  if (typeof ref === "string") return ShardIdentifier.parse(ref);
  if (ref && typeof ref === "object" && "group" in ref && "member" in ref)
    return ShardIdentifier.of(ref.group, ref.member);
  return ShardIdentifier.parse(ref as unknown as string); // throws with the value in its message
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

/** A key's value when it is given directly or as `{ set: value }`; undefined for filters. */
function scalarValue(value: unknown): unknown {
  if (typeof value === "string" || typeof value === "number" || typeof value === "bigint") return value;
  if (value && typeof value === "object" && "set" in value && Object.keys(value).length === 1) {
    return (value as Obj).set;
  }
  return undefined;
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
