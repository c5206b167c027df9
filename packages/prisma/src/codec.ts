/**
 * JSON that keeps bigints and Dates: event payloads and recorded command results carry money as
 * bigint minor units, which plain JSON cannot. `{"$bigint":"123"}` and `{"$date":"..."}` mark them
 * (at any depth, and at the top). The outbox stores payloads with `encodeJson`, the relay hands
 * them to `deliver` through `decodeJson`, and a sink that forwards them (`@shardkit/nats`) uses the
 * same pair, so a consumer decodes exactly what was encoded.
 *
 * Round trip: `decodeJson(encodeJson(v))` equals `v` for JSON values (finite numbers other than
 * -0, strings, booleans, null, arrays, plain objects) with bigints and valid Dates anywhere.
 * Not kept, as in plain JSON: `undefined` properties (dropped), `undefined` in arrays (null),
 * NaN and infinities (null), -0 (0), class instances other than Date (their own enumerable fields
 * or `toJSON`). An object of one key `$bigint` or `$date` whose value is a string reads back as a
 * bigint or Date: payloads must not use those as their only key. An invalid Date throws a
 * RangeError, as `toISOString` does.
 */
export function encodeJson(value: unknown): string {
  const text = JSON.stringify(value, function (this: Record<string, unknown>, key, v) {
    const raw = this[key];
    if (typeof raw === "bigint") return { $bigint: raw.toString() };
    if (raw instanceof Date) return { $date: raw.toISOString() };
    return v;
  });
  // JSON.stringify returns undefined (not a string) for undefined, a function or a symbol: such
  // a value is written as null, so a payload or a message body is always JSON text.
  return text ?? "null";
}

/** The value `encodeJson` wrote: bigints and Dates restored. Throws a SyntaxError on text that is not JSON. */
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
