import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeJson, encodeJson } from "./codec.js";

// The space the codec keeps: JSON values (no -0, NaN or infinities: plain JSON loses them) with
// bigints and valid Dates at any depth, and no object whose only key is a marker.
const isMarkerOnly = (o: Record<string, unknown>) => {
  const keys = Object.keys(o);
  return keys.length === 1 && (keys[0] === "$bigint" || keys[0] === "$date");
};
const leaf = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.string(),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Object.is(n, -0)),
  fc.bigInt(),
  fc.date({ noInvalidDate: true }),
);
const { value } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.array(tie("value")),
    fc
      .dictionary(fc.oneof(fc.string(), fc.constantFrom("$bigint", "$date")), tie("value"))
      .filter((o) => !isMarkerOnly(o)),
  ),
}));

describe("encodeJson / decodeJson", () => {
  it("round-trips every value of the space, and re-encoding what was decoded gives the same text", () => {
    fc.assert(
      fc.property(value, (v) => {
        const text = encodeJson(v);
        const back = decodeJson(text);
        expect(back).toEqual(v);
        expect(encodeJson(back)).toBe(text);
      }),
      { numRuns: 2_000 },
    );
  });

  it("writes bigints and Dates with the markers, and is plain JSON otherwise", () => {
    const v = {
      amount: 12345678901234567890n,
      at: new Date("2026-01-02T03:04:05.678Z"),
      list: [1n, "x", null],
    };
    const text = encodeJson(v);
    expect(JSON.parse(text)).toEqual({
      amount: { $bigint: "12345678901234567890" },
      at: { $date: "2026-01-02T03:04:05.678Z" },
      list: [{ $bigint: "1" }, "x", null],
    });
    expect(decodeJson(text)).toEqual(v);
    expect(encodeJson(-5n)).toBe('{"$bigint":"-5"}');
    expect(decodeJson(encodeJson(new Date(0)))).toEqual(new Date(0));
  });

  it("always returns JSON text: a value JSON cannot write at the top is null", () => {
    expect(encodeJson(undefined)).toBe("null");
    expect(encodeJson(() => 1)).toBe("null");
    expect(encodeJson({ a: undefined, b: [undefined] })).toBe('{"b":[null]}');
  });

  it("refuses text that is not JSON, and an invalid Date", () => {
    expect(() => decodeJson("{")).toThrow(SyntaxError);
    expect(() => encodeJson(new Date(Number.NaN))).toThrow(RangeError);
  });
});
