// Reads one call's shard keys out of Prisma arguments: which shard(s) `where` / `data` name, the
// IDs filled in for new rows, the claims a write takes. One reader per reading of a call; it knows
// nothing of databases or of Prisma's client. It is over 400 lines as one class on purpose: its
// methods are the steps of one reading (where, data, createMany rows, both halves of an upsert,
// nested writes), all sharing that reading's state (gathering or naming, what is waited on).
import { ShardIdentifier } from "@shardkit/id";
import {
  CrossShardError,
  isShardkitError,
  ShardKeyRequiredError,
  UnsupportedShardOperationError,
} from "../errors.js";
import { checkWrite, fillRow, type NestedReader } from "../nested.js";
import type { Obj } from "../plan.js";
import type { Lookup } from "../shard-key.js";
import type { Claim } from "../unique.js";
import {
  type KeySchema,
  type ModelKeys,
  type Named,
  type Reading,
  scalarValue,
  shardOfRef,
} from "./key-schema.js";

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

/** What a gathering reading answers where a key's shard waits on a lookup: its result is not used. */
const PENDING: Named = Object.freeze({ kind: "none", hint: "a key's lookup is not answered yet" });

type Found = { field: string; shard: ShardIdentifier };

/** One reading of one call (see `Reading`). */
export class KeyReader implements NestedReader {
  readonly gathering: boolean;
  /**
   * Lookups met and not answered, in order. Those a decision needs (no other key named the shard)
   * are kept (`needed`); those another key made moot are forgotten (`unneeded`).
   */
  private readonly waiting: Lookup[] = [];
  /** How many of `waiting` a decision has needed. */
  private committed = 0;

  constructor(
    readonly schema: KeySchema,
    private readonly reading: Reading,
  ) {
    this.gathering = reading.gathering;
  }

  /**
   * The shards `model.operation(args)` names, with the arguments to run (IDs filled in). Throws (a
   * ShardkitError) on keys that disagree, nested writes that leave the parent's shard, malformed IDs
   * and unknown shards.
   */
  read(model: string, operation: string, args: Obj): Named {
    const named = this.readTop(model, operation, args);
    if (named === PENDING) {
      checkWrite(this, model, operation, args, undefined); // for the lookups of nested keys
      return named;
    }
    const run = named.args ?? args;
    if (named.kind === "one") checkWrite(this, model, operation, run, named.shard);
    else if (named.kind === "in")
      for (const shard of named.byShard.keys()) checkWrite(this, model, operation, run, shard);
    // A write whose where names no shard runs on the transaction's shard: what it writes must stay there.
    else if (named.kind === "none" && this.reading.within)
      checkWrite(this, model, operation, run, this.reading.within);
    return named;
  }

  /**
   * Gathering: every lookup the call needs, each once. A reading stopped by bad input keeps those
   * needed before it (planning stops at the same input, with those answered).
   */
  gather(model: string, operation: string, args: Obj): Lookup[] {
    try {
      this.read(model, operation, args);
    } catch (error) {
      if (!isShardkitError(error)) throw error;
    }
    const byId = new Map<string, Lookup>();
    for (const lookup of this.waiting.slice(0, this.committed))
      if (!byId.has(lookup.id)) byId.set(lookup.id, lookup);
    return [...byId.values()];
  }

  /** The shard a nested write's key names; undefined while its lookup is gathered (gathering only). */
  shardOf(model: string, field: string, value: unknown): ShardIdentifier | undefined {
    const mark = this.waiting.length;
    const shard = this.keyShard(model, field, value);
    if (shard === undefined) this.needed(mark);
    return shard;
  }

  /** The shard a key value names, or undefined with its lookup listed (whether it is needed is decided by the caller). */
  private keyShard(model: string, field: string, value: unknown): ShardIdentifier | undefined {
    const key = this.schema.models.get(model)!.keys.find((k) => k.field === field)!;
    const answer = key.shardOf(value, this.reading.resolved);
    if (answer instanceof ShardIdentifier) return answer;
    this.waiting.push(answer);
    return undefined;
  }

  /**
   * The lookups listed since `mark` decide the call. Gathering: kept. Planning: one the resolve step
   * missed is a defect, said as such (never a guess).
   */
  private needed(mark: number): Named {
    if (!this.gathering) {
      throw new UnsupportedShardOperationError(
        `internal: the lookup ${this.waiting[mark]!.id} was not answered before the call was planned`,
      );
    }
    this.committed = this.waiting.length;
    return PENDING;
  }

  /** The lookups listed since `mark` decide nothing (another key named the shard): forgotten. */
  private unneeded(mark: number): void {
    this.waiting.length = Math.max(mark, this.committed);
  }

  private readTop(model: string, operation: string, args: Obj): Named {
    const within = this.reading.within;
    const spec = this.schema.models.get(model);
    if (spec && spec.unique.size > 0 && NO_CLAIMS.has(operation)) refuseClaims(spec, operation, args);
    switch (operation) {
      case "create": {
        const data = (args.data ?? {}) as Obj;
        const found = this.fromData(model, data, operation);
        if (found === PENDING) return found;
        const shard = found.kind === "one" ? found.shard : this.placeNew(model, data, operation);
        if (shard === undefined) return found;
        const filled = fillRow(this, model, data, shard, true, "data");
        const named: Named = { kind: "one", shard };
        if (filled !== data) named.args = { ...args, data: filled };
        const claims = this.claimsOf(model, filled, shard, filled[spec?.fill ?? "id"]);
        if (claims.length > 0) named.claims = claims;
        return named;
      }
      case "createMany":
      case "createManyAndReturn":
        return this.rows(model, operation, args);
      case "upsert": {
        const where = withArgs(this.fromWhere(model, args.where, operation), args);
        const data = this.fromData(model, args.create, operation);
        if (where === PENDING || data === PENDING) return PENDING;
        const named: Named =
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
        if (named.kind !== "one") return named;
        const shard = named.shard;
        const base = where.args ?? args;
        const create = fillRow(this, model, base.create as Obj, shard, true, "create");
        const update = fillRow(this, model, base.update as Obj, shard, false, "update");
        const filled: Named = { kind: "one", shard };
        if (base !== args || create !== base.create || update !== base.update) {
          filled.args = { ...base, create, update };
        }
        return filled;
      }
      default: {
        if (!WHERE_OPERATIONS.has(operation)) {
          return { kind: "none", hint: `${operation} is not routed by key; run it with $shard(...)` };
        }
        let named = withArgs(this.fromWhere(model, args.where, operation), args);
        if (named === PENDING) return named;
        const shard = named.kind === "one" ? named.shard : named.kind === "none" ? within : undefined;
        const base = named.args ?? args;
        if (shard && base.data && typeof base.data === "object") {
          const data = fillRow(this, model, base.data as Obj, shard, false, "data");
          if (data !== base.data) named = { ...named, args: { ...base, data } };
          if (named.kind === "one" && operation === "update") {
            const claims = this.claimsOf(model, data, shard, idOf(spec, base.where));
            if (claims.length > 0) named.claims = claims;
          }
        }
        return named;
      }
    }
  }

  /** The shard of a new row that names none: the transaction's, the model's `place` function, or the only shard. */
  private placeNew(model: string, data: Obj, operation: string): ShardIdentifier | undefined {
    const spec = this.schema.models.get(model);
    if (!spec?.fill) return undefined;
    if (this.reading.within) return this.reading.within;
    if (spec.place) return this.schema.resolve(shardOfRef(spec.place(data)));
    if (this.schema.shards.length === 1) return this.schema.shards[0];
    throw new ShardKeyRequiredError(
      model,
      operation,
      `data has none of its key fields (${spec.names.join(", ")}) and ${model} has no place function: give data.${spec.fill} (ShardedId.generate / ShardedId.colocatedWith), or models.${model}.place: (data) => shard`,
    );
  }

  /** The claims a write of `data` to `model` on `shard` takes for its row `ownerId`. */
  private claimsOf(model: string, data: Obj, shard: ShardIdentifier, ownerId: unknown): Claim[] {
    const spec = this.schema.models.get(model);
    // A claim needs no lookup, and a new row's ID is filled in only when planning.
    if (!spec || spec.unique.size === 0 || this.gathering) return [];
    const claims: Claim[] = [];
    for (const { unique } of spec.unique.values()) {
      const stored = scalarValue(data[unique.field]);
      if (typeof stored !== "string") continue;
      if (typeof ownerId !== "string") {
        throw new UnsupportedShardOperationError(
          `${model}: setting ${unique.field} (unique across shards) needs the row named by ${spec.fill} in where, so that its claim names the row`,
        );
      }
      claims.push(this.schema.claimFor(unique, stored, shard, ownerId));
    }
    return claims;
  }

  private fromData(model: string, data: unknown, operation: string): Named {
    const keys = this.schema.models.get(model)?.names ?? [];
    if (keys.length === 0)
      return { kind: "none", hint: `${model} has no shard key fields; run it with $shard(...)` };
    const found: Found[] = [];
    const mark = this.waiting.length;
    if (data && typeof data === "object") {
      for (const key of keys) {
        const value = scalarValue((data as Obj)[key]);
        if (value !== undefined) this.found(model, key, value, found);
      }
    }
    if (found.length > 0) {
      this.unneeded(mark);
      return this.agree(model, operation, found);
    }
    if (this.waiting.length > mark) return this.needed(mark);
    return {
      kind: "none",
      hint: `data has none of its key fields (${keys.join(", ")}); generate the ID with ShardedId.generate or ShardedId.colocatedWith`,
    };
  }

  /** Reads one key value into `found` (unless its lookup is not answered: then it is listed). */
  private found(model: string, field: string, value: unknown, found: Found[]): void {
    const shard = this.keyShard(model, field, value);
    if (shard) found.push({ field, shard });
  }

  private fromWhere(model: string, where: unknown, operation: string): Named {
    const keys = this.schema.models.get(model)?.names ?? [];
    const eq: Found[] = [];
    const mark = this.waiting.length;
    const inList = keys.length > 0 ? this.collect(model, keys, where, true, eq, undefined) : undefined;
    if (eq.length > 0) {
      this.unneeded(mark);
      return this.agree(model, operation, eq);
    }
    if (this.waiting.length > mark) return this.needed(mark);
    if (inList) {
      const { field, values } = inList;
      const byShard = new Map<ShardIdentifier, unknown[]>();
      for (const value of values) {
        const shard = this.keyShard(model, field, value);
        if (shard) push(byShard, shard, value);
      }
      if (this.waiting.length > mark) return this.needed(mark);
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
   * `where` made exact (the row's ID and the value as stored).
   */
  private byUnique(model: string, where: unknown): Named | undefined {
    const spec = this.schema.models.get(model);
    if (!spec || spec.unique.size === 0 || this.reading.within || !where || typeof where !== "object") {
      return undefined;
    }
    for (const key of spec.unique.values()) {
      const condition = (where as Obj)[key.field];
      const raw =
        typeof condition === "string"
          ? condition
          : condition && typeof condition === "object" && Object.keys(condition).length === 1
            ? (condition as Obj).equals
            : undefined;
      if (typeof raw !== "string") continue;
      const answer = key.shardOf(raw, this.reading.resolved);
      if (!(answer instanceof ShardIdentifier)) {
        this.waiting.push(answer);
        return this.needed(this.waiting.length - 1);
      }
      const record = key.claimOf(raw, this.reading.resolved);
      if (!record) return { kind: "one", shard: answer };
      return {
        kind: "one",
        shard: answer,
        args: { where: { ...(where as Obj), [key.field]: record.stored, [spec.fill!]: record.ownerId } },
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
    inList: { field: string; values: unknown[] } | undefined,
  ): { field: string; values: unknown[] } | undefined {
    if (!where || typeof where !== "object") return inList;
    const obj = where as Obj;
    for (const key of keys) {
      const condition = obj[key];
      const value = scalarValue(condition);
      if (value !== undefined) {
        this.found(model, key, value, eq);
      } else if (condition && typeof condition === "object") {
        const c = condition as Obj;
        if (c.equals !== undefined) this.found(model, key, c.equals, eq);
        else if (Array.isArray(c.in) && top && !inList) inList = { field: key, values: c.in };
      }
    }
    const and = obj.AND;
    if (Array.isArray(and))
      for (const part of and) inList = this.collect(model, keys, part, false, eq, inList);
    else if (and && typeof and === "object") inList = this.collect(model, keys, and, false, eq, inList);
    return inList;
  }

  private rows(model: string, operation: string, args: Obj): Named {
    const rows = Array.isArray(args.data) ? args.data : args.data === undefined ? [] : [args.data];
    const byShard = new Map<ShardIdentifier, unknown[]>();
    const filled: Obj[] = [];
    let changed = false;
    let pending = false;
    for (const [i, row] of rows.entries()) {
      const at = `${operation} data[${i}]`;
      const named = this.fromData(model, row, at);
      if (named === PENDING) {
        pending = true;
        continue;
      }
      const shard = named.kind === "one" ? named.shard : this.placeNew(model, (row ?? {}) as Obj, at);
      if (shard === undefined) {
        throw new ShardKeyRequiredError(model, at, named.kind === "none" ? named.hint : "");
      }
      const next = fillRow(this, model, row as Obj, shard, true, `data[${i}]`);
      if (next !== row) changed = true;
      filled.push(next);
      push(byShard, shard, next);
    }
    if (pending) return PENDING;
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
}

/** A `where` made exact (by a unique field's claim) in the call's whole arguments. */
function withArgs(named: Named, args: Obj): Named {
  return named.args ? { ...named, args: { ...args, ...named.args } } : named;
}

function refuseClaims(spec: ModelKeys, operation: string, args: Obj): void {
  const rows = [args.data, args.create, args.update].flatMap((d) => (Array.isArray(d) ? d : [d]));
  for (const { unique } of spec.unique.values()) {
    if (rows.some((row) => row && typeof row === "object" && (row as Obj)[unique.field] !== undefined)) {
      throw new UnsupportedShardOperationError(
        `${unique.scope} is unique across shards and ${operation} cannot claim it: use create or update (one row, one claim)`,
      );
    }
  }
}

/** The row ID a `where` names by equality on the model's ShardedUUID field. */
function idOf(spec: ModelKeys | undefined, where: unknown): unknown {
  const field = spec?.fill;
  if (!field || !where || typeof where !== "object") return undefined;
  const condition = (where as Obj)[field];
  return typeof condition === "string" ? condition : undefined;
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
