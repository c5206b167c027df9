/**
 * JSON that keeps bigints and Dates: event payloads and recorded command results carry money as
 * bigint minor units, which plain JSON cannot. `{"$bigint":"123"}` and `{"$date":"..."}` mark them.
 */
export function encodeJson(value: unknown): string {
  return JSON.stringify(value, function (this: Record<string, unknown>, key, v) {
    const raw = this[key];
    if (typeof raw === "bigint") return { $bigint: raw.toString() };
    if (raw instanceof Date) return { $date: raw.toISOString() };
    return v;
  });
}

export function decodeJson<T = unknown>(text: string): T {
  return JSON.parse(text, (_key, v) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length === 1 && typeof v.$bigint === "string") return BigInt(v.$bigint);
      if (keys.length === 1 && typeof v.$date === "string") return new Date(v.$date);
    }
    return v;
  }) as T;
}
