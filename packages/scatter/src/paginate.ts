import { decodeCursor, encodeCursor, isAfter, type KeysetPosition } from "./cursor.js";
import { InvalidScatterOptionsError, UnsortedInputError } from "./errors.js";
import { mergeSorted } from "./merge-sorted.js";
import { type NormalizedSortKey, normalizeOrderBy, type OrderByInput } from "./sort.js";

/** One page of a query that spans several sources (shards). */
export interface PageRequest {
  /** The sort order (see {@link OrderByInput}). */
  orderBy: OrderByInput;
  /** A unique field (e.g. `id`) appended to the order when absent, so the order is total and cursors exact. */
  tiebreaker: string;
  /** Rows in the page (an integer >= 1). */
  limit: number;
  /** Rows to skip (after the cursor, if any). Default 0. */
  offset?: number;
  /** A cursor from a previous page's `nextCursor`: the page starts strictly after it. */
  cursor?: string | null;
}

/** What each source must fetch for a page, and how to merge it ({@link mergePage}). */
export interface PagePlan {
  /** The full order (tiebreaker included): each source sorts by it. */
  readonly orderBy: NormalizedSortKey[];
  /** Rows each source fetches, from its start (skip 0) or right after `after`: `offset + limit`. */
  readonly take: number;
  /** With a cursor: each source fetches only rows strictly after this position ({@link keysetWhere}, {@link keysetSql}). */
  readonly after: KeysetPosition | null;
  readonly offset: number;
  readonly limit: number;
}

/** A merged page. */
export interface Page<Row> {
  /** At most `limit` rows in order. */
  readonly rows: Row[];
  /** Pass it as `cursor` (with offset 0) for the next page; null when there is certainly no next page. */
  readonly nextCursor: string | null;
  /** False only when every source is exhausted; true may precede an empty last page when a source returned exactly `take` rows. */
  readonly hasMore: boolean;
}

/**
 * Rewrites a page request into what every source fetches: the same order, `skip` 0 and
 * `take: offset + limit`, and, with a cursor, only rows strictly after the cursor's position (so
 * deep pages cost `limit` rows per source, not `offset + limit`). Throws `INVALID_CURSOR` for a
 * cursor made for another order.
 */
export function planPage(request: PageRequest): PagePlan {
  if (typeof request.tiebreaker !== "string" || request.tiebreaker === "")
    throw new InvalidScatterOptionsError("tiebreaker must name a unique field (e.g. 'id')");
  const orderBy = normalizeOrderBy(request.orderBy, request.tiebreaker);
  if (orderBy[orderBy.length - 1]?.field !== request.tiebreaker)
    throw new InvalidScatterOptionsError(
      `the tiebreaker ${request.tiebreaker} must be the last sort key (keys after a unique one never apply)`,
    );
  const limit = request.limit;
  const offset = request.offset ?? 0;
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new InvalidScatterOptionsError(`limit must be an integer >= 1, got ${String(limit)}`);
  if (!Number.isSafeInteger(offset) || offset < 0)
    throw new InvalidScatterOptionsError(`offset must be an integer >= 0, got ${String(offset)}`);
  const after =
    request.cursor === undefined || request.cursor === null ? null : decodeCursor(request.cursor, orderBy);
  return { orderBy, take: offset + limit, after, offset, limit };
}

/**
 * Merges what each source returned for `plan` (each sorted by `plan.orderBy`, at most
 * `plan.take` rows, after `plan.after`) into the page, and makes the cursor of the next page.
 * Rows equal in the whole order cannot occur when the tiebreaker is unique.
 */
export function mergePage<Row extends object>(
  plan: PagePlan,
  sources: readonly (readonly Row[])[],
): Page<Row> {
  let total = 0;
  let someFull = false;
  sources.forEach((rows, s) => {
    total += rows.length;
    if (rows.length >= plan.take) someFull = true;
    const first = rows[0];
    if (plan.after && first !== undefined && !isAfter(first, plan.after))
      throw new UnsortedInputError(
        `source ${s} returned a row that is not after the cursor: apply the keyset filter on every source`,
      );
  });
  const rows = mergeSorted(sources, plan.orderBy, { offset: plan.offset, limit: plan.limit });
  const hasMore = total > plan.take || someFull;
  const last = rows[rows.length - 1];
  return {
    rows,
    nextCursor: hasMore && last !== undefined ? encodeCursor(last, plan.orderBy) : null,
    hasMore,
  };
}
