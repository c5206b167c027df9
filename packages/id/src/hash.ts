import { InvalidShardError } from "./errors.js";
import type { ShardIdentifier } from "./shard-identifier.js";

/**
 * The one frozen hash shardkit places values with: the selector's members, `byHash` keys, the
 * claims of fields unique across shards, advisory lock keys. Frozen: `hash.test.ts` holds test
 * vectors, and any change to them moves existing values to other shards.
 *
 * - `murmur3`: MurmurHash3 x86 32-bit, seed 0, over the UTF-8 bytes of the key (lone surrogates
 *   encode as U+FFFD, as `TextEncoder` does). Computed straight from the UTF-16 string, no buffer.
 * - Choice among candidates: weighted rendezvous (highest random weight) hashing. Each candidate
 *   m (a member number, or a shard's 14 bits) draws `x = fmix32(keyHash ^ salt(m))`, a 32-bit value
 *   that depends only on the key and the candidate's number, never on the other candidates. With
 *   equal weights the candidate with the largest x wins; with weights, the one with the smallest
 *   `-ln(u) / weight` (u = (x + 0.5) / 2^32) wins, which gives each a share proportional to its
 *   weight. Ties go to the lower number. Adding a candidate only takes keys for which the new one
 *   wins: about 1/(n+1) of them.
 *
 * Everything is 32-bit integer arithmetic plus, for weights, a logarithm evaluated with IEEE-754
 * additions, multiplications and divisions only (not `Math.log`, whose last bit may differ between
 * engines), so results are identical in every process, platform and release.
 */

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;
const GOLDEN = 0x9e3779b1;
const TWO_POW_MINUS_32 = 2 ** -32;
/** 1 - 0.5 / 2^32 - 1e-14: `1 - u - margin` is `BOUND_OFFSET - x / 2^32`. */
const BOUND_OFFSET = 1 - 0.5 * TWO_POW_MINUS_32 - 1e-14;

/** MurmurHash3's 32-bit finalizer: a bijection on 32-bit integers with full avalanche. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function mixBlock(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** MurmurHash3 x86_32 (seed 0) of the UTF-8 encoding of `text`, as an unsigned 32-bit integer. */
export function murmur3(text: string): number {
  let h = 0;
  let block = 0; // up to 4 pending bytes, little-endian
  let shift = 0; // bits pending in block: 0, 8, 16 or 24
  let length = 0; // bytes consumed
  const n = text.length;
  let i = 0;
  // Fast path: whole blocks of four ASCII characters while the block is aligned.
  for (; i + 4 <= n; i += 4) {
    const c0 = text.charCodeAt(i);
    const c1 = text.charCodeAt(i + 1);
    const c2 = text.charCodeAt(i + 2);
    const c3 = text.charCodeAt(i + 3);
    if ((c0 | c1 | c2 | c3) >= 0x80) break;
    h = mixBlock(h, c0 | (c1 << 8) | (c2 << 16) | (c3 << 24));
    length += 4;
  }
  for (; i < n; i++) {
    let c = text.charCodeAt(i);
    // Encode one code point (1 to 4 bytes) into `bytes`, first byte lowest.
    let bytes: number;
    let count: number;
    if (c < 0x80) {
      bytes = c;
      count = 1;
    } else if (c < 0x800) {
      bytes = 0xc0 | (c >> 6) | ((0x80 | (c & 0x3f)) << 8);
      count = 2;
    } else {
      if (c >= 0xd800 && c <= 0xdfff) {
        const next = i + 1 < n ? text.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
          i++;
        } else c = 0xfffd; // lone surrogate
      }
      if (c < 0x10000) {
        bytes = 0xe0 | (c >> 12) | ((0x80 | ((c >> 6) & 0x3f)) << 8) | ((0x80 | (c & 0x3f)) << 16);
        count = 3;
      } else {
        bytes =
          0xf0 |
          (c >> 18) |
          ((0x80 | ((c >> 12) & 0x3f)) << 8) |
          ((0x80 | ((c >> 6) & 0x3f)) << 16) |
          ((0x80 | (c & 0x3f)) << 24);
        count = 4;
      }
    }
    for (let j = 0; j < count; j++) {
      block |= ((bytes >>> (j << 3)) & 0xff) << shift;
      length++;
      if (shift === 24) {
        h = mixBlock(h, block);
        block = 0;
        shift = 0;
      } else shift += 8;
    }
  }
  if (shift !== 0) {
    let k = Math.imul(block, C1);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, C2);
  }
  return fmix32(h ^ length);
}

/** The per-candidate constant of rendezvous hashing: depends on the candidate's number only. */
export function memberSalt(member: number): number {
  return Math.imul(member + 1, GOLDEN) | 0;
}

/** Candidate `member`'s 32-bit draw for a key hash. */
export function memberDraw(keyHash: number, member: number): number {
  return fmix32(keyHash ^ memberSalt(member));
}

const LN2 = Math.LN2; // "the Number value for" ln 2: the same double on every engine
const SQRT2 = Math.SQRT2;
const LN_2_POW_32 = 32 * LN2;
/** `INVERSE_POWERS_OF_TWO[e + 1] = 2^-e` for e = -1..31. */
const INVERSE_POWERS_OF_TWO = Float64Array.from({ length: 33 }, (_, i) => 2 ** (1 - i));

/**
 * `-ln((x + 0.5) / 2^32)` for a 32-bit unsigned x: an exponential variate, > 0. Uses only IEEE
 * basic operations in a fixed order (bit-identical on every engine): v = 2^e * m with m in
 * [sqrt(1/2), sqrt(2)), and ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), by its series to s^23.
 */
export function exponentialOf(x: number): number {
  let e = 31 - Math.clz32(x); // -1 for x = 0
  let m = (x + 0.5) * INVERSE_POWERS_OF_TWO[e + 1]!; // exact: scaling by a power of two
  if (m > SQRT2) {
    m *= 0.5;
    e++;
  }
  const s = (m - 1) / (m + 1);
  const s2 = s * s;
  const series =
    1 +
    s2 *
      (1 / 3 +
        s2 *
          (1 / 5 +
            s2 *
              (1 / 7 +
                s2 *
                  (1 / 9 +
                    s2 *
                      (1 / 11 +
                        s2 *
                          (1 / 13 +
                            s2 * (1 / 15 + s2 * (1 / 17 + s2 * (1 / 19 + s2 * (1 / 21 + s2 / 23))))))))));
  return LN_2_POW_32 - (e * LN2 + 2 * s * series);
}

/** A set of candidate members prepared for rendezvous hashing (member numbers ascending). */
export interface Candidates {
  readonly members: Int32Array;
  readonly salts: Int32Array;
  /** Weight of each member; all equal when `uniform`. */
  readonly weights: Float64Array;
  /** 1 / weight, rounded: only used to skip members that cannot win. */
  readonly inverseWeights: Float64Array;
  readonly uniform: boolean;
}

export function prepareCandidates(members: readonly { member: number; weight: number }[]): Candidates {
  const sorted = [...members].sort((a, b) => a.member - b.member);
  const first = sorted[0]?.weight;
  return {
    members: Int32Array.from(sorted, (m) => m.member),
    salts: Int32Array.from(sorted, (m) => memberSalt(m.member)),
    weights: Float64Array.from(sorted, (m) => m.weight),
    inverseWeights: Float64Array.from(sorted, (m) => 1 / m.weight),
    uniform: sorted.every((m) => m.weight === first),
  };
}

/** Index (into `candidates.members`) of the member that owns `keyHash`. At least one candidate. */
export function rendezvous(candidates: Candidates, keyHash: number): number {
  const salts = candidates.salts;
  const n = salts.length;
  let best = 0;
  if (candidates.uniform) {
    let top = -1;
    for (let i = 0; i < n; i++) {
      const draw = fmix32(keyHash ^ salts[i]!);
      if (draw > top) {
        top = draw;
        best = i;
      }
    }
    return best;
  }
  const weights = candidates.weights;
  const inverse = candidates.inverseWeights;
  let lowest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < n; i++) {
    const draw = fmix32(keyHash ^ salts[i]!);
    // -ln(u) >= 1 - u, so (1 - u - margin) / weight bounds the score from below; the margin
    // (1e-14) covers the rounding of both sides. A member whose bound cannot beat the best score
    // so far is skipped without its logarithm: most of them, as the best score drops fast.
    // Skipping never changes the result, only the cost (about ln(n) logarithms instead of n).
    if ((BOUND_OFFSET - draw * TWO_POW_MINUS_32) * inverse[i]! >= lowest) continue;
    const score = exponentialOf(draw) / weights[i]!;
    if (score < lowest) {
      lowest = score;
      best = i;
    }
  }
  return best;
}

/**
 * The shard a value hashes to among `shards`: rendezvous over the shards' 14-bit numbers
 * (`ShardIdentifier.bits`, equal weights) with the value's murmur3, prepared once. Adding a shard
 * to the list moves about 1/(n+1) of the values, to the new shard only.
 */
export function shardHash(shards: readonly ShardIdentifier[]): (value: string) => ShardIdentifier {
  const byBits = new Map(shards.map((shard) => [shard.bits, shard]));
  if (byBits.size === 0) throw new InvalidShardError("shardHash: expected at least one shard");
  const candidates = prepareCandidates([...byBits.keys()].map((member) => ({ member, weight: 1 })));
  const ordered = Array.from(candidates.members, (bits) => byBits.get(bits)!);
  return (value) => ordered[rendezvous(candidates, murmur3(value))]!;
}
