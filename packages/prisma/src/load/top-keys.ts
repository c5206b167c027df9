// The heaviest routing keys of one shard in a window: a space-saving sketch of fixed size.

/** One heavy hitter: its key, how often it was seen, and by how much that may be overcounted. */
export interface TopKey {
  /** The key: a short hex hash of the value (default), or the value itself (`plainKeys: true`). */
  key: string;
  /** Calls counted for it: the true count is between `count - error` and `count`. */
  count: number;
  /** The most `count` may exceed the true count by (0: exact). */
  error: number;
}

/**
 * Space-saving (Metwally et al.): `k` counters; a key not held replaces the smallest one and
 * inherits its count as its possible error. Every key seen more than n/k times is held; each
 * `count` is at most the true count + `error`. O(1) for a held key, O(k) to replace one.
 */
export class SpaceSaving {
  private readonly keys: string[] = [];
  private readonly counts: number[] = [];
  private readonly errors: number[] = [];
  private readonly index = new Map<string, number>();

  constructor(readonly k: number) {}

  get size(): number {
    return this.keys.length;
  }

  add(key: string, times = 1): void {
    const at = this.index.get(key);
    if (at !== undefined) {
      this.counts[at]! += times;
      return;
    }
    if (this.keys.length < this.k) {
      this.index.set(key, this.keys.length);
      this.keys.push(key);
      this.counts.push(times);
      this.errors.push(0);
      return;
    }
    let min = 0;
    for (let i = 1; i < this.counts.length; i++) if (this.counts[i]! < this.counts[min]!) min = i;
    this.index.delete(this.keys[min]!);
    this.index.set(key, min);
    this.keys[min] = key;
    this.errors[min] = this.counts[min]!;
    this.counts[min]! += times;
  }

  /** The keys held, heaviest first (ties by key), each renamed by `name`. */
  top(name: (key: string) => string = (key) => key): TopKey[] {
    return this.keys
      .map((key, i) => ({ key: name(key), count: this.counts[i]!, error: this.errors[i]! }))
      .sort((x, y) => y.count - x.count || (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
  }

  clear(): void {
    this.keys.length = 0;
    this.counts.length = 0;
    this.errors.length = 0;
    this.index.clear();
  }
}

/**
 * Merges lists of heavy hitters (windows, routers) into the `k` heaviest: counts and errors of one
 * key add up; a key absent from a full list may have been seen up to that list's smallest count
 * there, which is added to its error.
 */
export function mergeTopKeys(lists: readonly (readonly TopKey[])[], k: number): TopKey[] {
  const merged = new Map<string, TopKey>();
  for (const list of lists) {
    for (const t of list) {
      const m = merged.get(t.key);
      if (m) {
        m.count += t.count;
        m.error += t.error;
      } else merged.set(t.key, { key: t.key, count: t.count, error: t.error });
    }
  }
  for (const list of lists) {
    if (list.length < k || list.length === 0) continue;
    const floor = Math.min(...list.map((t) => t.count));
    const held = new Set(list.map((t) => t.key));
    for (const m of merged.values()) {
      if (!held.has(m.key)) {
        m.count += floor;
        m.error += floor;
      }
    }
  }
  return [...merged.values()]
    .sort((x, y) => y.count - x.count || (x.key < y.key ? -1 : x.key > y.key ? 1 : 0))
    .slice(0, k);
}
