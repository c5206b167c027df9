import { InvalidScatterOptionsError, UnsortedInputError } from "./errors.js";
import { compareBy, type OrderByInput } from "./sort.js";

/** Which slice of the merged order to return. */
export interface MergeOptions {
  /** Rows of the merged order to skip. Default 0. */
  offset?: number | undefined;
  /** Most rows to return. Default: all. */
  limit?: number | undefined;
}

/**
 * k-way heap merge of sources that are each sorted by `orderBy`: returns rows `offset` to
 * `offset + limit` of the merged order, touching only those rows (O((offset + limit) log k)).
 * Equal rows keep source order. A source that is not sorted by `orderBy` (as far as the merge
 * reads it) throws `UNSORTED_INPUT`: usually the database sorts strings with another collation.
 */
export function mergeSorted<Row>(
  sources: readonly (readonly Row[])[],
  orderBy: OrderByInput,
  options: MergeOptions = {},
): Row[] {
  const { offset, limit } = checkSlice(options);
  const cmp = compareBy<Row>(orderBy);
  const k = sources.length;
  const pos = new Array<number>(k).fill(0);
  // heap of source indices ordered by their current row, then by source index
  const heap: number[] = [];
  const less = (s: number, t: number): boolean => {
    const c = cmp(
      (sources[s] as Row[])[pos[s] as number] as Row,
      (sources[t] as Row[])[pos[t] as number] as Row,
    );
    return c < 0 || (c === 0 && s < t);
  };
  const down = (start: number): void => {
    let i = start;
    const len = heap.length;
    const top = heap[i] as number;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= len) break;
      const r = l + 1;
      const c = r < len && less(heap[r] as number, heap[l] as number) ? r : l;
      if (!less(heap[c] as number, top)) break;
      heap[i] = heap[c] as number;
      i = c;
    }
    heap[i] = top;
  };
  for (let s = 0; s < k; s++) if ((sources[s] as Row[]).length > 0) heap.push(s);
  for (let i = (heap.length >> 1) - 1; i >= 0; i--) down(i);

  const out: Row[] = [];
  const end = offset + limit;
  for (let taken = 0; taken < end && heap.length > 0; taken++) {
    const s = heap[0] as number;
    const src = sources[s] as Row[];
    const p = pos[s] as number;
    const row = src[p] as Row;
    if (taken >= offset) out.push(row);
    if (p + 1 < src.length) {
      if (cmp(row, src[p + 1] as Row) > 0)
        throw new UnsortedInputError(
          `source ${s} is not sorted by the requested order at rows ${p} and ${p + 1} (does the database sort strings with a different collation?)`,
        );
      pos[s] = p + 1;
    } else {
      const last = heap.pop() as number;
      if (heap.length === 0) continue;
      heap[0] = last;
    }
    down(0);
  }
  return out;
}

export function checkSlice(options: MergeOptions): { offset: number; limit: number } {
  const offset = options.offset ?? 0;
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  if (!Number.isSafeInteger(offset) || offset < 0)
    throw new InvalidScatterOptionsError(`offset must be an integer >= 0, got ${String(offset)}`);
  if (!(limit === Number.POSITIVE_INFINITY || (Number.isSafeInteger(limit) && limit >= 0)))
    throw new InvalidScatterOptionsError(`limit must be an integer >= 0, got ${String(limit)}`);
  return { offset, limit };
}
