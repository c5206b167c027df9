import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidShardError, isShardkitError } from "./errors.js";
import { MAX_GROUP, MAX_MEMBER, ShardIdentifier } from "./shard-identifier.js";

describe("ShardIdentifier", () => {
  it("DEFAULT is (0,0) with bits 0 and key 0/0", () => {
    expect(ShardIdentifier.DEFAULT.group).toBe(0);
    expect(ShardIdentifier.DEFAULT.member).toBe(0);
    expect(ShardIdentifier.DEFAULT.bits).toBe(0);
    expect(ShardIdentifier.DEFAULT.key).toBe("0/0");
  });

  it("bits is group << 6 | member", () => {
    const shard = ShardIdentifier.of(0xa5, 0x2c);
    expect(shard.bits).toBe(0x296c);
    expect(ShardIdentifier.of(MAX_GROUP, MAX_MEMBER).bits).toBe(16383);
  });

  it("interns instances and compares by value", () => {
    expect(ShardIdentifier.of(3, 7)).toBe(ShardIdentifier.of(3, 7));
    expect(ShardIdentifier.of(3, 7).equals(ShardIdentifier.fromBits((3 << 6) | 7))).toBe(true);
    expect(ShardIdentifier.of(3, 7).equals(ShardIdentifier.of(7, 3))).toBe(false);
    expect(ShardIdentifier.of(3, 7).equals(undefined)).toBe(false);
    expect(Object.isFrozen(ShardIdentifier.of(3, 7))).toBe(true);
  });

  it("round-trips every one of the 16,384 shards through of, bits, fromBits, key and parse", () => {
    const keys = new Set<string>();
    for (let group = 0; group <= MAX_GROUP; group++) {
      for (let member = 0; member <= MAX_MEMBER; member++) {
        const shard = ShardIdentifier.of(group, member);
        expect(ShardIdentifier.fromBits(shard.bits)).toBe(shard);
        expect(ShardIdentifier.parse(shard.key)).toBe(shard);
        expect(JSON.parse(JSON.stringify({ shard })).shard).toBe(shard.key);
        keys.add(shard.key);
      }
    }
    expect(keys.size).toBe(16384);
  });

  it.each([
    [-1, 0],
    [256, 0],
    [0, 64],
    [0, -1],
    [1.5, 0],
    [0, 0.5],
    [Number.NaN, 0],
    [0, Number.POSITIVE_INFINITY],
    ["1" as unknown as number, 0],
  ])("of(%s, %s) throws InvalidShardError", (group, member) => {
    expect(() => ShardIdentifier.of(group, member)).toThrow(InvalidShardError);
  });

  it("rejects out-of-range bits", () => {
    for (const bits of [-1, 16384, 0.5, Number.NaN]) {
      expect(() => ShardIdentifier.fromBits(bits)).toThrow(InvalidShardError);
    }
  });

  it.each([
    "",
    "1",
    "1/",
    "/1",
    "01/2",
    "1/02",
    " 1/2",
    "1/2 ",
    "1:2",
    "256/0",
    "0/64",
    "+1/2",
    "1/2/3",
    "1.2",
  ])("parse(%j) throws a typed error", (key) => {
    let caught: unknown;
    try {
      ShardIdentifier.parse(key);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(InvalidShardError);
    expect(isShardkitError(caught, "INVALID_SHARD")).toBe(true);
  });

  it("never accepts a key that does not round-trip (property)", () => {
    fc.assert(
      fc.property(fc.string(), (key) => {
        try {
          expect(ShardIdentifier.parse(key).key).toBe(key);
        } catch (err) {
          expect(err).toBeInstanceOf(InvalidShardError);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("cannot be constructed directly", () => {
    const Ctor = ShardIdentifier as unknown as new (g: number, m: number) => ShardIdentifier;
    expect(() => new Ctor(1, 1)).toThrow(InvalidShardError);
  });
});
