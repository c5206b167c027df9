/**
 * The wire form of an event payload: JSON that keeps bigints and Dates, with the markers the
 * outbox itself stores them with (`{"$bigint":"123"}`, `{"$date":"..."}`), so money in bigint minor
 * units and timestamps arrive as they were written. A consumer in another language reads plain JSON.
 */
export function encodePayload(value: unknown): string {
  return JSON.stringify(value ?? null, function (this: Record<string, unknown>, key, v) {
    const raw = this[key];
    if (typeof raw === "bigint") return { $bigint: raw.toString() };
    if (raw instanceof Date) return { $date: raw.toISOString() };
    return v;
  });
}

/** The payload `encodePayload` wrote: bigints and Dates restored. Throws on text that is not JSON. */
export function decodePayload<T = unknown>(text: string): T {
  return JSON.parse(text, (_key, v) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length === 1 && typeof v.$bigint === "string") return BigInt(v.$bigint);
      if (keys.length === 1 && typeof v.$date === "string") return new Date(v.$date);
    }
    return v;
  }) as T;
}
