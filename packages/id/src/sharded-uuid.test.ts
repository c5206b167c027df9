import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidShardedIdError, isShardkitError } from "./errors.js";
import { MAX_GROUP, MAX_MEMBER, ShardIdentifier } from "./shard-identifier.js";
import { ShardedUUID, ShardedUUIDGenerator } from "./sharded-uuid.js";

const CANONICAL = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const shardArb = fc
  .record({ group: fc.integer({ min: 0, max: MAX_GROUP }), member: fc.integer({ min: 0, max: MAX_MEMBER }) })
  .map(({ group, member }) => ShardIdentifier.of(group, member));

function expectInvalid(fn: () => unknown): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(InvalidShardedIdError);
  expect(isShardkitError(caught, "INVALID_SHARDED_ID")).toBe(true);
}

describe("ShardedUUID bit layout (hand-computed vectors)", () => {
  // group 0xA5 = 1010 0101, member 0x2C = 10 1100 -> 14 bits 10 1001 0110 1100 = 0x296C.
  // Variant 10 + those bits: 1010 1001 0110 1100 = 0xA96C, the fourth hyphen group.
  const id = "01901234-5678-7abc-a96c-0123456789ab";

  it("decodes group 0xA5 member 0x2C from the variant/shard group", () => {
    const shard = ShardedUUID.shardOf(id);
    expect(shard.group).toBe(0xa5);
    expect(shard.member).toBe(0x2c);
  });

  it("decodes the 48-bit millisecond timestamp", () => {
    expect(ShardedUUID.timestampOf(id)).toBe(0x019012345678);
  });

  it("bytes: 01 90 12 34 | 56 78 | 7a bc | a9 6c | 01 23 45 67 89 ab", () => {
    expect(Array.from(ShardedUUID.toBytes(id))).toEqual([
      0x01, 0x90, 0x12, 0x34, 0x56, 0x78, 0x7a, 0xbc, 0xa9, 0x6c, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
    ]);
    expect(ShardedUUID.fromBytes(ShardedUUID.toBytes(id))).toBe(id);
  });

  it("generate writes the same fourth group for that shard", () => {
    const generated = ShardedUUID.generate(ShardIdentifier.of(0xa5, 0x2c));
    expect(generated.slice(19, 23)).toBe("a96c");
    expect(generated[14]).toBe("7");
  });

  it("DEFAULT shard IDs have fourth group 8000..8000 (variant only)", () => {
    expect(ShardedUUID.generate().slice(19, 23)).toBe("8000");
    expect(ShardedUUID.generate(ShardIdentifier.of(MAX_GROUP, MAX_MEMBER)).slice(19, 23)).toBe("bfff");
  });
});

describe("ShardedUUID properties", () => {
  it("every one of the 16,384 shards round-trips through generate and shardOf", () => {
    for (let bits = 0; bits < 16384; bits++) {
      const shard = ShardIdentifier.fromBits(bits);
      const id = ShardedUUID.generate(shard);
      expect(ShardedUUID.shardOf(id)).toBe(shard);
      expect(ShardedUUID.shardOf(ShardedUUID.fromBytes(ShardedUUID.toBytes(id)))).toBe(shard);
    }
  });

  it("version and variant bits are always right, and the string is canonical", () => {
    fc.assert(
      fc.property(shardArb, (shard) => {
        const id = ShardedUUID.generate(shard);
        expect(id).toMatch(CANONICAL);
        const bytes = ShardedUUID.toBytes(id);
        expect(bytes[6]! >> 4).toBe(7);
        expect(bytes[8]! >> 6).toBe(0b10);
        expect(ShardedUUID.isValid(id)).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });

  it("timestamp round-trips for any 48-bit millisecond value", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 48 - 1 }), shardArb, (ms, shard) => {
        const gen = new ShardedUUIDGenerator(() => ms);
        const id = gen.generate(shard);
        expect(ShardedUUID.timestampOf(id)).toBe(ms);
        expect(ShardedUUID.shardOf(id)).toBe(shard);
      }),
      { numRuns: 5000 },
    );
  });

  it("the real clock lands in the timestamp", () => {
    const before = Date.now();
    const ts = ShardedUUID.timestampOf(ShardedUUID.generate());
    expect(ts).toBeGreaterThanOrEqual(before);
    expect(ts).toBeLessThanOrEqual(Date.now() + 1);
  });

  it("is strictly increasing over 1e5 IDs generated in a tight loop (mixed shards)", () => {
    const ids: string[] = new Array(100_000);
    for (let i = 0; i < ids.length; i++) ids[i] = ShardedUUID.generate(ShardIdentifier.fromBits(i % 16384));
    for (let i = 1; i < ids.length; i++) {
      if (!(ids[i - 1]! < ids[i]!)) throw new Error(`not increasing at ${i}: ${ids[i - 1]} >= ${ids[i]}`);
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("stays strictly increasing and unique across a clock that steps back", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -5000, max: 5000 }), { minLength: 2, maxLength: 300 }),
        (steps) => {
          let clock = 1_700_000_000_000;
          const gen = new ShardedUUIDGenerator(() => clock);
          let previous = gen.generate(ShardIdentifier.DEFAULT);
          for (const step of steps) {
            clock += step;
            const next = gen.generate(ShardIdentifier.of(1, 1));
            expect(next > previous).toBe(true);
            previous = next;
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("a clock step back keeps the last timestamp instead of going back in time", () => {
    let clock = 1_700_000_000_000;
    const gen = new ShardedUUIDGenerator(() => clock);
    const a = gen.generate(ShardIdentifier.DEFAULT);
    clock -= 60_000;
    const b = gen.generate(ShardIdentifier.DEFAULT);
    expect(b > a).toBe(true);
    expect(ShardedUUID.timestampOf(b)).toBe(1_700_000_000_000);
  });

  it("counter overflow within one millisecond produces no duplicate and keeps order", () => {
    const clock = 1_700_000_000_000;
    const gen = new ShardedUUIDGenerator(() => clock); // frozen clock: every ID in the same millisecond
    const ids = Array.from({ length: 20_000 }, () => gen.generate(ShardIdentifier.of(2, 3)));
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    // 20,000 IDs need at least 5 rollovers of the 12-bit counter (seeded in its lower half):
    // the timestamp borrows from the future rather than repeating.
    const last = ShardedUUID.timestampOf(ids.at(-1)!);
    expect(last).toBeGreaterThanOrEqual(clock + 4);
    expect(last).toBeLessThanOrEqual(clock + 10);
  });

  it("decodes v7 UUIDs from other generators to whatever their shard bits say", () => {
    // A v7 UUID that was not made by shardkit: valid, its "shard" is just its random bits.
    const foreign = "018f6b1e-3c4d-7e5f-9a1b-2c3d4e5f6a7b";
    const shard = ShardedUUID.shardOf(foreign);
    expect(shard.bits).toBe(0x9a1b & 0x3fff);
  });
});

describe("ShardedUUID rejects non-canonical input with InvalidShardedIdError", () => {
  const valid = "01901234-5678-7abc-a96c-0123456789ab";
  it.each([
    ["a v4 UUID", "0f8fad5b-d9cb-469f-a165-70867728950e"],
    ["upper case", valid.toUpperCase()],
    ["braces", `{${valid}}`],
    ["no hyphens", valid.replaceAll("-", "")],
    ["too short", valid.slice(0, 35)],
    ["too long", `${valid}0`],
    ["hyphen misplaced", "019012345-678-7abc-a96c-0123456789ab"],
    ["NCS variant (0xxx)", "01901234-5678-7abc-296c-0123456789ab"],
    ["Microsoft variant (110x)", "01901234-5678-7abc-c96c-0123456789ab"],
    ["version 8", "01901234-5678-8abc-a96c-0123456789ab"],
    ["non-hex", "01901234-5678-7abc-a96c-0123456789ag"],
    ["empty", ""],
    ["non-ASCII", "01901234-5678-7abc-a96c-0123456789aé"],
  ])("%s", (_label, input) => {
    expectInvalid(() => ShardedUUID.shardOf(input));
    expectInvalid(() => ShardedUUID.timestampOf(input));
    expectInvalid(() => ShardedUUID.toBytes(input));
    expect(ShardedUUID.isValid(input)).toBe(false);
  });

  it("non-strings", () => {
    for (const value of [undefined, null, 42, {}, ["x"]]) {
      expectInvalid(() => ShardedUUID.shardOf(value as unknown as string));
      expect(ShardedUUID.isValid(value)).toBe(false);
    }
  });

  it("fromBytes rejects wrong lengths and non-v7 bytes", () => {
    expectInvalid(() => ShardedUUID.fromBytes(new Uint8Array(15)));
    expectInvalid(() => ShardedUUID.fromBytes(new Uint8Array(16))); // version 0
    expectInvalid(() => ShardedUUID.fromBytes("x" as unknown as Uint8Array));
  });

  it("any string that is not exactly canonical v7 throws (property)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.uuid(), fc.stringMatching(/^[0-9a-fA-F-]{36}$/)), (input) => {
        if (CANONICAL.test(input)) {
          expect(ShardedUUID.shardOf(input).bits).toBe(Number.parseInt(input.slice(19, 23), 16) & 0x3fff);
        } else {
          expectInvalid(() => ShardedUUID.shardOf(input));
        }
      }),
      { numRuns: 5000 },
    );
  });

  it("mutating one character of a valid ID either keeps it canonical or throws (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 35 }), fc.string({ minLength: 1, maxLength: 1 }), (at, ch) => {
        const id = ShardedUUID.generate(ShardIdentifier.of(9, 9));
        const mutated = id.slice(0, at) + ch + id.slice(at + 1);
        expect(ShardedUUID.isValid(mutated)).toBe(CANONICAL.test(mutated));
      }),
      { numRuns: 5000 },
    );
  });
});
