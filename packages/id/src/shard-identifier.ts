import { InvalidShardError } from "./errors.js";

/** Largest group number (8 bits). */
export const MAX_GROUP = 0xff;
/** Largest member number (6 bits). */
export const MAX_MEMBER = 0x3f;
const SHARD_COUNT = (MAX_GROUP + 1) * (MAX_MEMBER + 1);
const KEY_PATTERN = /^(0|[1-9]\d{0,2})\/(0|[1-9]\d?)$/;

const interned: (ShardIdentifier | undefined)[] = new Array(SHARD_COUNT);
let constructing = false;

/**
 * A logical shard: `group` is the policy axis (where data may live: residency, tenant isolation),
 * `member` the capacity axis (which of the group's databases). Instances are interned, so
 * `ShardIdentifier.of(1, 2) === ShardIdentifier.of(1, 2)`; `equals` works either way.
 *
 * The stable string key is `"group/member"` (e.g. `"1/2"`): safe as a Map key, in JSON, YAML and
 * environment variables (no form of it reads as a number).
 */
export class ShardIdentifier {
  /** The shard every ID lives on while a service runs on one database: (0, 0). */
  static readonly DEFAULT: ShardIdentifier = ShardIdentifier.of(0, 0);

  /** 0..255 */
  readonly group: number;
  /** 0..63 */
  readonly member: number;
  /** `group << 6 | member`: the 14 bits a ShardedUUID carries. */
  readonly bits: number;
  /** `"group/member"` */
  readonly key: string;

  private constructor(group: number, member: number) {
    if (!constructing) throw new InvalidShardError("Use ShardIdentifier.of(group, member)");
    this.group = group;
    this.member = member;
    this.bits = (group << 6) | member;
    this.key = `${group}/${member}`;
    Object.freeze(this);
  }

  /** The shard (group, member). Throws `InvalidShardError` unless both are integers in range. */
  static of(group: number, member: number): ShardIdentifier {
    if (!Number.isInteger(group) || group < 0 || group > MAX_GROUP) {
      throw new InvalidShardError(`Shard group must be an integer 0..${MAX_GROUP}, got ${String(group)}`);
    }
    if (!Number.isInteger(member) || member < 0 || member > MAX_MEMBER) {
      throw new InvalidShardError(`Shard member must be an integer 0..${MAX_MEMBER}, got ${String(member)}`);
    }
    return ShardIdentifier.fromValidBits((group << 6) | member);
  }

  /** The shard whose `bits` is `bits` (0..16383). */
  static fromBits(bits: number): ShardIdentifier {
    if (!Number.isInteger(bits) || bits < 0 || bits >= SHARD_COUNT) {
      throw new InvalidShardError(`Shard bits must be an integer 0..${SHARD_COUNT - 1}, got ${String(bits)}`);
    }
    return ShardIdentifier.fromValidBits(bits);
  }

  /** Parses the stable key `"group/member"`; strict: no spaces, signs or leading zeros. */
  static parse(key: string): ShardIdentifier {
    const match = typeof key === "string" ? KEY_PATTERN.exec(key) : null;
    if (!match) {
      throw new InvalidShardError(
        `Shard key must look like "group/member" (e.g. "1/2"), got ${JSON.stringify(key)}`,
      );
    }
    return ShardIdentifier.of(Number(match[1]), Number(match[2]));
  }

  /** @internal bits already checked to be in range */
  static fromValidBits(bits: number): ShardIdentifier {
    let shard = interned[bits];
    if (shard === undefined) {
      constructing = true;
      try {
        shard = new ShardIdentifier(bits >> 6, bits & MAX_MEMBER);
      } finally {
        constructing = false;
      }
      interned[bits] = shard;
    }
    return shard;
  }

  equals(other: ShardIdentifier | null | undefined): boolean {
    return other != null && other.bits === this.bits;
  }

  toString(): string {
    return this.key;
  }

  toJSON(): string {
    return this.key;
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `ShardIdentifier(${this.group}, ${this.member})`;
  }
}
