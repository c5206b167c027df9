import { InvalidShardedIdError } from "./errors.js";
import { ShardIdentifier } from "./shard-identifier.js";

// Layout (RFC 9562 version 7, shard bits in rand_b):
//   unix_ts_ms:48 | ver:4 = 7 | rand_a:12 (monotonic counter) | var:2 = 0b10 | group:8 | member:6 | random:48
// In the canonical string the 14 shard bits and the variant are the 4th hyphen group (chars 19..22).

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
const HEX3 = Array.from({ length: 4096 }, (_, i) => i.toString(16).padStart(3, "0"));
// 4th group text per shard: "8" | "9" | "a" | "b" followed by 3 hex digits.
const SHARD_GROUP_TEXT = Array.from({ length: 1 << 14 }, (_, bits) => (0x8000 | bits).toString(16));

// UTF-16 code unit -> hex value for '0'-'9' and 'a'-'f', -1 for everything else (upper case is not canonical).
const HEX_VALUE = new Int8Array(0x10000).fill(-1);
for (let i = 0; i < 16; i++) HEX_VALUE["0123456789abcdef".charCodeAt(i)] = i;

const POOL_SIZE = 16 * 1024;
/** Seeds occupy the lower half of the 12-bit counter so at least 2048 IDs fit in each millisecond. */
const SEED_MASK = 0x7ff;
const COUNTER_MAX = 0xfff;
const MAX_TIMESTAMP = 2 ** 48 - 1;

/** Monotonic UUIDv7 generator state; one per process (or per test, with an injected clock). */
export class ShardedUUIDGenerator {
  private readonly pool = new Uint8Array(POOL_SIZE);
  private poolIndex = POOL_SIZE;
  private lastMs = -1;
  private counter = 0;
  private prefix = "";

  constructor(private readonly now: () => number = Date.now) {}

  generate(shard: ShardIdentifier): string {
    this.tick();
    if (this.poolIndex + 6 > POOL_SIZE) this.refill();
    const p = this.pool;
    const i = this.poolIndex;
    this.poolIndex = i + 6;
    return (
      this.prefix +
      HEX3[this.counter] +
      "-" +
      SHARD_GROUP_TEXT[shard.bits] +
      "-" +
      HEX[p[i]!]! +
      HEX[p[i + 1]!]! +
      HEX[p[i + 2]!]! +
      HEX[p[i + 3]!]! +
      HEX[p[i + 4]!]! +
      HEX[p[i + 5]!]!
    );
  }

  /**
   * RFC 9562 6.2 method 1: rand_a is a counter, seeded randomly when the millisecond changes and
   * incremented otherwise. A clock that steps back or a counter that overflows keeps the last
   * timestamp (advanced by one on overflow), so IDs stay strictly increasing and unique.
   */
  private tick(): void {
    const now = this.now();
    if (now > this.lastMs) {
      this.setTimestamp(Math.min(Math.floor(now), MAX_TIMESTAMP));
      this.counter = this.seed();
    } else if (this.counter < COUNTER_MAX) {
      this.counter++;
    } else {
      this.setTimestamp(this.lastMs + 1);
      this.counter = this.seed();
    }
  }

  private setTimestamp(ms: number): void {
    this.lastMs = ms;
    const hi = Math.floor(ms / 2 ** 16); // top 32 bits
    const lo = ms % 2 ** 16;
    this.prefix = `${hi.toString(16).padStart(8, "0")}-${lo.toString(16).padStart(4, "0")}-7`;
  }

  private seed(): number {
    if (this.poolIndex + 2 > POOL_SIZE) this.refill();
    const p = this.pool;
    const i = this.poolIndex;
    this.poolIndex = i + 2;
    return ((p[i]! << 8) | p[i + 1]!) & SEED_MASK;
  }

  private refill(): void {
    crypto.getRandomValues(this.pool);
    this.poolIndex = 0;
  }
}

const defaultGenerator = new ShardedUUIDGenerator();

/**
 * The 14 shard bits of a canonical version-7 UUID with the RFC variant, or -1 for anything else.
 * Every one of the 32 digits is checked (straight-line code: on a small VM each character costs
 * about 1.3 ns, which is the whole cost of decoding).
 */
function decodeShardBits(id: unknown): number {
  if (
    typeof id !== "string" ||
    id.length !== 36 ||
    id.charCodeAt(8) !== 45 ||
    id.charCodeAt(13) !== 45 ||
    id.charCodeAt(18) !== 45 ||
    id.charCodeAt(23) !== 45 ||
    id.charCodeAt(14) !== 55
  ) {
    return -1;
  }
  const group4 =
    (HEX_VALUE[id.charCodeAt(19)]! << 12) |
    (HEX_VALUE[id.charCodeAt(20)]! << 8) |
    (HEX_VALUE[id.charCodeAt(21)]! << 4) |
    HEX_VALUE[id.charCodeAt(22)]!;
  const digits =
    HEX_VALUE[id.charCodeAt(0)]! |
    HEX_VALUE[id.charCodeAt(1)]! |
    HEX_VALUE[id.charCodeAt(2)]! |
    HEX_VALUE[id.charCodeAt(3)]! |
    HEX_VALUE[id.charCodeAt(4)]! |
    HEX_VALUE[id.charCodeAt(5)]! |
    HEX_VALUE[id.charCodeAt(6)]! |
    HEX_VALUE[id.charCodeAt(7)]! |
    HEX_VALUE[id.charCodeAt(9)]! |
    HEX_VALUE[id.charCodeAt(10)]! |
    HEX_VALUE[id.charCodeAt(11)]! |
    HEX_VALUE[id.charCodeAt(12)]! |
    HEX_VALUE[id.charCodeAt(15)]! |
    HEX_VALUE[id.charCodeAt(16)]! |
    HEX_VALUE[id.charCodeAt(17)]! |
    HEX_VALUE[id.charCodeAt(24)]! |
    HEX_VALUE[id.charCodeAt(25)]! |
    HEX_VALUE[id.charCodeAt(26)]! |
    HEX_VALUE[id.charCodeAt(27)]! |
    HEX_VALUE[id.charCodeAt(28)]! |
    HEX_VALUE[id.charCodeAt(29)]! |
    HEX_VALUE[id.charCodeAt(30)]! |
    HEX_VALUE[id.charCodeAt(31)]! |
    HEX_VALUE[id.charCodeAt(32)]! |
    HEX_VALUE[id.charCodeAt(33)]! |
    HEX_VALUE[id.charCodeAt(34)]! |
    HEX_VALUE[id.charCodeAt(35)]!;
  return (digits | group4) < 0 || (group4 & 0xc000) !== 0x8000 ? -1 : group4 & 0x3fff;
}

/** Why `id` is not a canonical version-7 UUID with the RFC variant, or undefined if it is. */
function invalidReason(id: unknown): string | undefined {
  if (typeof id !== "string") return "not a string";
  if (id.length !== 36) return "expected 36 characters (8-4-4-4-12 lowercase hex)";
  if (
    id.charCodeAt(8) !== 45 ||
    id.charCodeAt(13) !== 45 ||
    id.charCodeAt(18) !== 45 ||
    id.charCodeAt(23) !== 45
  ) {
    return "expected hyphens at positions 8, 13, 18 and 23";
  }
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id))
    return "expected lowercase hexadecimal digits";
  if (id.charCodeAt(14) !== 55) return `version is ${id[14]}, expected 7`;
  if ((HEX_VALUE[id.charCodeAt(19)]! & 0xc) !== 0x8) return "variant is not the RFC 9562 variant (10xx)";
  return undefined;
}

function hex4(id: string, at: number): number {
  return (
    (HEX_VALUE[id.charCodeAt(at)]! << 12) |
    (HEX_VALUE[id.charCodeAt(at + 1)]! << 8) |
    (HEX_VALUE[id.charCodeAt(at + 2)]! << 4) |
    HEX_VALUE[id.charCodeAt(at + 3)]!
  );
}

function invalid(id: unknown): never {
  throw new InvalidShardedIdError(id, invalidReason(id) ?? "not a sharded ID");
}

function assertValid(id: unknown): asserts id is string {
  if (decodeShardBits(id) < 0) invalid(id);
}

/**
 * Version-7 UUIDs that carry their shard. `generate` is strictly increasing within a process.
 * Any canonical v7 UUID decodes (one from another generator decodes to whatever its random bits
 * say, so a registry must still reject shards it does not know); anything else throws
 * `InvalidShardedIdError`.
 */
export const ShardedUUID = {
  /** A new canonical lowercase UUIDv7 string on `shard`. */
  generate(shard: ShardIdentifier = ShardIdentifier.DEFAULT): string {
    return defaultGenerator.generate(shard);
  },

  /** The shard an ID names. Throws `InvalidShardedIdError` for anything but a canonical v7 UUID. */
  shardOf(id: string): ShardIdentifier {
    const bits = decodeShardBits(id);
    return ShardIdentifier.fromValidBits(bits < 0 ? invalid(id) : bits);
  },

  /** Milliseconds since the Unix epoch encoded in the ID. */
  timestampOf(id: string): number {
    assertValid(id);
    return hex4(id, 0) * 2 ** 32 + hex4(id, 4) * 2 ** 16 + hex4(id, 9);
  },

  /** True when `id` is a canonical lowercase version-7 UUID with the RFC 9562 variant. */
  isValid(id: unknown): id is string {
    return decodeShardBits(id) >= 0;
  },

  /** The 16 bytes of an ID, for `bytea`/binary storage. */
  toBytes(id: string): Uint8Array {
    assertValid(id);
    const out = new Uint8Array(16);
    let j = 0;
    for (let i = 0; i < 36; i += 2) {
      if (i === 8 || i === 13 || i === 18 || i === 23) i++;
      out[j++] = (HEX_VALUE[id.charCodeAt(i)]! << 4) | HEX_VALUE[id.charCodeAt(i + 1)]!;
    }
    return out;
  },

  /** The canonical string of 16 bytes; throws unless they are a version-7 UUID with the RFC variant. */
  fromBytes(bytes: Uint8Array): string {
    if (!(bytes instanceof Uint8Array) || bytes.length !== 16) {
      throw new InvalidShardedIdError(bytes, "expected a Uint8Array of 16 bytes");
    }
    let s = "";
    for (let i = 0; i < 16; i++) {
      if (i === 4 || i === 6 || i === 8 || i === 10) s += "-";
      s += HEX[bytes[i]!];
    }
    assertValid(s);
    return s;
  },
} as const;
