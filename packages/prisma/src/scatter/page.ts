import { ShardedUUID } from "@shardkit/id";
import { InvalidCursorError, keysetWhere, mergePage, type Page, planPage } from "@shardkit/scatter";
import { UnsupportedShardOperationError } from "../errors.js";
import type { Obj, ScatterRead } from "../plan.js";
import { and, dropNullTerms, sortKeys, tiebreakerOf } from "./find.js";
import { isObj, type ModelInfo } from "./read.js";

/** One page of a list over every database, continued by an opaque cursor. */
export interface ScatterPageArgs<Where = Obj, OrderBy = Obj> {
  where?: Where;
  /** The order; `id` is appended as the tiebreaker. Scalar fields only. */
  orderBy: OrderBy | OrderBy[];
  /** Rows in the page, 1 to 1000. */
  limit: number;
  /** A previous page's `nextCursor`; absent or null for the first page. */
  cursor?: string | null | undefined;
}

/**
 * A keyset page over several databases (`db.$scatterPage`): every database returns its first
 * `limit` rows after the cursor's position in the page's order, and the lists are merged. The
 * cursor encodes the last row's sort values, so a page is exact however rows were added or
 * deleted since the previous one. A cursor that does not decode, was made for another order or
 * holds a value of the wrong type for its field is an `InvalidCursorError` before any query (a null
 * for a field no row holds null in, once the field is known to be required).
 */
export function planPageRead(model: ModelInfo, args: ScatterPageArgs): ScatterRead {
  const label = `${model.name}.$scatterPage`;
  if (!isObj(args))
    throw new UnsupportedShardOperationError(`${label}: expected { where?, orderBy, limit, cursor? }`);
  if (!Number.isSafeInteger(args.limit) || args.limit < 1 || args.limit > 1000)
    throw new UnsupportedShardOperationError(`${label}: limit must be an integer from 1 to 1000`);
  const tiebreaker = tiebreakerOf(model, label);
  const { keys, orderBy } = sortKeys(model, label, args.orderBy, tiebreaker);
  const plan = planPage({ orderBy: keys, tiebreaker, limit: args.limit, cursor: args.cursor ?? null });
  if (plan.after) {
    for (const k of plan.after.keys) {
      if (!fits(model.fields[k.field]?.type, k.value, k.field === tiebreaker))
        throw new InvalidCursorError(
          `${label}: the cursor's ${k.field} is not a ${model.fields[k.field]?.type}`,
        );
    }
  }
  const read = (after: Obj | undefined): ScatterRead => ({
    operation: "findMany",
    argsFor(target) {
      const where = and(target.args.where, after);
      return { ...(where === undefined ? {} : { where }), orderBy, take: plan.take };
    },
    merge: (values) => mergePage(plan, values as Obj[][]) satisfies Page<Obj>,
  });
  const position = plan.after;
  if (!position) return read(undefined);
  return {
    ...read(undefined),
    prepare: {
      fields: keys.map((k) => k.field).filter((f) => f !== tiebreaker),
      resume: (_row, nullable) => {
        // A null the cursor cannot hold (its field is required: no row's value is null).
        const impossible = position.keys.find((k) => k.value === null && !nullable.has(k.field));
        if (impossible)
          throw new InvalidCursorError(
            `${label}: the cursor's ${impossible.field} is null, which no row holds`,
          );
        return read(dropNullTerms(keysetWhere(position), nullable) as Obj);
      },
    },
  };
}

/** Whether a decoded cursor value can be the value of a field of this type (null only where a field may be null). */
function fits(type: string | undefined, value: unknown, tiebreaker: boolean): boolean {
  if (tiebreaker) return typeof value === "string" && ShardedUUID.isValid(value);
  if (value === null) return true;
  switch (type) {
    case "String":
      return typeof value === "string";
    case "Int":
    case "Float":
      return (
        typeof value === "number" &&
        Number.isFinite(value) &&
        (type === "Float" || Number.isSafeInteger(value))
      );
    case "BigInt":
      return typeof value === "bigint";
    case "Boolean":
      return typeof value === "boolean";
    case "DateTime":
      // PostgreSQL's timestamps reach 4713 BC, but Prisma sends a Date as ISO 8601 text, which it
      // accepts only from year 1; JavaScript's last Date (275760 AD) is within PostgreSQL's range.
      return value instanceof Date && !Number.isNaN(value.getTime()) && value.getUTCFullYear() >= 1;
    default:
      return false;
  }
}
