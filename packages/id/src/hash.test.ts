import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidShardError } from "./errors.js";
import {
  exponentialOf,
  fmix32,
  memberDraw,
  murmur3,
  prepareCandidates,
  rendezvous,
  shardHash,
} from "./hash.js";
import { ShardIdentifier } from "./shard-identifier.js";

/** A plain MurmurHash3 x86_32 over bytes, written from the algorithm's description, as a reference. */
function murmur3Bytes(bytes: Uint8Array, seed = 0): number {
  const rotl = (x: number, r: number) => (x << r) | (x >>> (32 - r));
  const scramble = (k: number) => Math.imul(rotl(Math.imul(k, 0xcc9e2d51), 15), 0x1b873593);
  let h = seed | 0;
  const blocks = bytes.length >> 2;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < blocks; i++) {
    h ^= scramble(view.getUint32(i * 4, true));
    h = (Math.imul(rotl(h, 13), 5) + 0xe6546b64) | 0;
  }
  let tail = 0;
  for (let i = bytes.length & 3; i > 0; i--) tail = (tail << 8) | bytes[blocks * 4 + i - 1]!;
  if ((bytes.length & 3) !== 0) h ^= scramble(tail);
  return fmix32(h ^ bytes.length);
}

const utf8 = new TextEncoder();

describe("murmur3 (MurmurHash3 x86_32, seed 0, UTF-8)", () => {
  it("matches the published MurmurHash3 x86_32 values", () => {
    expect(murmur3("")).toBe(0);
    expect(murmur3("a")).toBe(0x3c2569b2);
    expect(murmur3("abc")).toBe(0xb3dd93fa);
    expect(murmur3("test")).toBe(0xba6bd213);
    expect(murmur3("hello")).toBe(0x248bfa47);
    expect(murmur3("Hello, world!")).toBe(0xc0363e43);
    expect(murmur3("The quick brown fox jumps over the lazy dog")).toBe(0x2e4ff723);
  });

  it("equals the byte-wise reference over TextEncoder's UTF-8 for any string (lone surrogates included)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 40 }), (text) => {
        expect(murmur3(text)).toBe(murmur3Bytes(utf8.encode(text)));
      }),
      { numRuns: 2000, seed: 20260101 },
    );
    for (const text of ["\ud800", "a\udc00b", "\ud83e\udd8a", "\ud83e", "€", "߿", "ࠀ", "\uffff"]) {
      expect(murmur3(text)).toBe(murmur3Bytes(utf8.encode(text)));
    }
  });

  it("returns an unsigned 32-bit integer", () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        const h = murmur3(text);
        expect(Number.isInteger(h) && h >= 0 && h <= 0xffffffff).toBe(true);
      }),
      { seed: 7 },
    );
  });
});

describe("exponentialOf (deterministic -ln((x + 0.5) / 2^32))", () => {
  it("agrees with Math.log to 1e-9 relative error and is strictly decreasing", () => {
    let previous = Number.POSITIVE_INFINITY;
    const xs = [0, 1, 2, 3, 1000, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 2, 2 ** 32 - 1];
    for (let x = 5; x < 2 ** 32; x = Math.floor(x * 1.37) + 11) xs.push(x);
    xs.sort((a, b) => a - b);
    for (const x of xs) {
      const value = exponentialOf(x);
      const reference = -Math.log((x + 0.5) / 2 ** 32);
      expect(Math.abs(value - reference) / reference).toBeLessThan(1e-9);
      expect(value).toBeLessThan(previous);
      previous = value;
    }
  });
});

describe("rendezvous", () => {
  const uniform = (members: number[], weight = 1) =>
    prepareCandidates(members.map((member) => ({ member, weight })));

  it("with equal weights, the weighted path picks the same member as the fast path", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 63 }), { minLength: 1, maxLength: 64 }),
        fc.integer({ min: 0, max: 0xffffffff }),
        fc.double({ min: 0.01, max: 100, noNaN: true }),
        (members, keyHash, weight) => {
          const fast = uniform(members, weight);
          const slow = { ...fast, uniform: false };
          expect(rendezvous(slow, keyHash)).toBe(rendezvous(fast, keyHash));
        },
      ),
      { numRuns: 500, seed: 11 },
    );
  });

  it("picks the member with the largest draw, whatever order members are listed in", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 63 }), { minLength: 1, maxLength: 64 }),
        fc.integer({ min: 0, max: 0xffffffff }),
        (members, keyHash) => {
          const c = uniform(members);
          const chosen = c.members[rendezvous(c, keyHash)]!;
          const best = Math.max(...members.map((m) => memberDraw(keyHash, m)));
          expect(memberDraw(keyHash, chosen)).toBe(best);
          expect(
            uniform([...members].reverse()).members[rendezvous(uniform([...members].reverse()), keyHash)],
          ).toBe(chosen);
        },
      ),
      { numRuns: 300, seed: 12 },
    );
  });

  // Frozen: [key, murmur3(key), member of 0..7, member of 0..63, member of {3, 10, 17 (weight 2), 40 (weight 0.5), 63}].
  // If one of these changes, existing tenants would move: that is a breaking change, not a refactor.
  const vectors: [string, number, number, number, number][] = [
    ["tenant-1", 0x03cbda85, 3, 10, 10],
    ["tenant-2", 0x4ecd3edf, 1, 47, 63],
    ["tenant-42", 0xaca623b6, 6, 17, 17],
    ["acme", 0xa4392cd0, 3, 16, 17],
    ["globex", 0x40217c5a, 0, 43, 17],
    ["initech", 0x8be51dd4, 5, 44, 10],
    ["0", 0xd271c07f, 0, 0, 10],
    ["12345", 0x13a51193, 5, 34, 63],
    ["ñandú", 0x3dd70beb, 4, 30, 10],
    ["日本語テナント", 0x25c512a4, 4, 35, 17],
    ["🦊-tenant", 0xe7d7b122, 3, 53, 10],
    ["a-rather-long-tenant-identifier-0001", 0xfebdc157, 1, 1, 3],
  ];
  const eight = uniform([0, 1, 2, 3, 4, 5, 6, 7]);
  const sixtyFour = uniform(Array.from({ length: 64 }, (_, i) => i));
  const weighted = prepareCandidates([
    { member: 63, weight: 1 },
    { member: 40, weight: 0.5 },
    { member: 17, weight: 2 },
    { member: 10, weight: 1 },
    { member: 3, weight: 1 },
  ]);

  it.each(vectors)("frozen vector %j", (key, hash, of8, of64, ofWeighted) => {
    expect(murmur3(key)).toBe(hash);
    expect(eight.members[rendezvous(eight, hash)]).toBe(of8);
    expect(sixtyFour.members[rendezvous(sixtyFour, hash)]).toBe(of64);
    expect(weighted.members[rendezvous(weighted, hash)]).toBe(ofWeighted);
  });
});

describe("shardHash (a value's shard among a list of shards)", () => {
  const S = [
    ShardIdentifier.of(0, 0),
    ShardIdentifier.of(0, 1),
    ShardIdentifier.of(1, 0),
    ShardIdentifier.of(1, 1),
  ];
  const shard = fc.integer({ min: 0, max: 16383 }).map(ShardIdentifier.fromBits);

  // Frozen: byHash keys, claims of unique fields and anything else placed with it would move.
  it("frozen vectors", () => {
    const of = shardHash([...S, ShardIdentifier.of(7, 63)]);
    const values = [
      "alpha",
      "beta",
      "gamma",
      "delta",
      "epsilon",
      "User.email\u0000ana@example.com",
      "ñandú",
      "🦊",
    ];
    expect(values.map((v) => of(v).key)).toEqual(["0/0", "0/0", "0/1", "1/1", "0/0", "1/0", "0/0", "0/1"]);
  });

  it("picks the shard with the largest draw for the value's murmur3, whatever the list's order or repeats", () => {
    fc.assert(
      fc.property(fc.uniqueArray(shard, { minLength: 1, maxLength: 40 }), fc.string(), (shards, value) => {
        const chosen = shardHash(shards)(value);
        const draw = (s: ShardIdentifier) => memberDraw(murmur3(value), s.bits);
        expect(Math.max(...shards.map(draw))).toBe(draw(chosen));
        expect(shardHash([...shards].reverse().concat(shards))(value)).toBe(chosen);
      }),
      { numRuns: 500, seed: 21 },
    );
  });

  it("adding a shard moves values to the new shard only, about 1/(n+1) of them", () => {
    const before = shardHash(S.slice(0, 3));
    const after = shardHash(S);
    let moved = 0;
    for (let i = 0; i < 20_000; i++) {
      const [from, to] = [before(`user-${i}`), after(`user-${i}`)];
      if (from !== to) {
        expect(to).toBe(S[3]);
        moved++;
      }
    }
    expect(Math.abs(moved / 20_000 - 0.25)).toBeLessThan(0.02);
  });

  it("refuses an empty list", () => {
    expect(() => shardHash([])).toThrow(InvalidShardError);
  });
});
