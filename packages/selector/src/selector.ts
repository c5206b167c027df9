import { type Candidates, murmur3, prepareCandidates, rendezvous, ShardIdentifier } from "@shardkit/id";
import {
  type NormalizedCondition,
  type NormalizedConfig,
  type NormalizedRule,
  parseConfig,
  type RuleValue,
  type ShardSelectorConfig,
} from "./config.js";
import {
  InvalidPropertiesError,
  InvalidRoutingKeyError,
  MissingRoutingKeyError,
  NoGroupMatchError,
} from "./errors.js";

/** How the group was chosen. */
export type GroupChoice =
  | {
      readonly by: "rule";
      readonly group: number;
      readonly name?: string;
      readonly rule: number;
      readonly ruleName?: string;
    }
  | { readonly by: "default"; readonly group: number; readonly name?: string };

/** How the member was chosen. `keyHash`/`splitHash` are the MurmurHash3 values the choice was made from. */
export type MemberChoice =
  | {
      readonly by: "hash";
      readonly member: number;
      readonly routingKey: string;
      readonly key: string;
      readonly keyHash: number;
      /** Members that could take the row (not draining), ascending. */
      readonly candidates: readonly number[];
      /** Members of the group skipped because they are draining. */
      readonly draining: readonly number[];
    }
  | { readonly by: "pin"; readonly member: number; readonly routingKey: string; readonly key: string }
  | {
      readonly by: "split";
      readonly member: number;
      readonly routingKey: string;
      readonly key: string;
      readonly splitBy: string;
      readonly splitKey: string;
      readonly splitHash: number;
      readonly candidates: readonly number[];
    };

/** What `explain()` returns: the shard, and why. */
export interface SelectionExplanation {
  readonly shard: ShardIdentifier;
  readonly group: GroupChoice;
  readonly member: MemberChoice;
  /** One line for logs, e.g. `shard 1/3: group 1 "mx-onshore" by rule 0 "mx-bank"; member 3 by rendezvous hash of tenantId ...`. */
  readonly reason: string;
}

/** Chooses the shard of a new row. Created by {@link createShardSelector}. */
export interface ShardSelector<Props extends object = Record<string, unknown>> {
  /** The shard for a new row with these properties. Throws a `SelectorError` subclass rather than guess. */
  select(props: Props): ShardIdentifier;
  /** The same choice as `select`, with which rule matched and how the member was chosen. */
  explain(props: Props): SelectionExplanation;
}

/** The members a key may be given (draining ones left out), and the shard of each. */
interface MemberPool {
  readonly candidates: Candidates;
  /** Shard of each candidate, by candidate index. */
  readonly shards: readonly ShardIdentifier[];
}

/** The shard of `pool` that a key's hash is placed on (rendezvous hashing over its candidates). */
function shardOf(pool: MemberPool, hash: number): ShardIdentifier {
  return pool.shards[rendezvous(pool.candidates, hash)]!;
}

type Hot =
  | { readonly kind: "pin"; readonly shard: ShardIdentifier }
  | { readonly kind: "split"; readonly splitBy: string; readonly pool: MemberPool };

interface Group {
  readonly group: number;
  readonly name: string | undefined;
  readonly pool: MemberPool;
  readonly draining: readonly number[];
  readonly hot: ReadonlyMap<string, Hot> | undefined;
}

interface Rule {
  readonly index: number;
  readonly name: string | undefined;
  readonly fields: readonly string[];
  /** Per field: the value to equal, or the set to be one of. */
  readonly tests: readonly (RuleValue | ReadonlySet<RuleValue>)[];
  readonly group: Group;
}

/**
 * Validates `config` (throws `InvalidSelectorConfigError`, code `INVALID_SELECTOR_CONFIG`,
 * listing every issue with its path) and returns a selector: the first matching rule (else
 * `defaultGroup`) picks the group, a rendezvous hash of `props[routingKey]` picks the member
 * among the group's members that are not draining.
 */
export function createShardSelector<Props extends object = Record<string, unknown>>(
  config: ShardSelectorConfig<NoInfer<Props>>,
): ShardSelector<Props> {
  return new Selector<Props>(parseConfig(config));
}

class Selector<Props extends object> implements ShardSelector<Props> {
  readonly #routingKey: string;
  readonly #rules: readonly Rule[];
  readonly #defaultGroup: Group | undefined;
  /** Every property any rule reads, for error messages. */
  readonly #ruleFields: readonly string[];

  constructor(config: NormalizedConfig) {
    this.#routingKey = config.routingKey;
    const groups = new Map<number, Group>();
    for (const g of config.groups) {
      const weightOf = new Map(g.members.map((m) => [m.member, m.weight]));
      const poolOf = (members: readonly number[]): MemberPool => {
        const candidates = prepareCandidates(
          members.map((member) => ({ member, weight: weightOf.get(member)! })),
        );
        return {
          candidates,
          shards: Array.from(candidates.members, (member) => ShardIdentifier.of(g.group, member)),
        };
      };
      const active = g.members.filter((m) => !m.draining).map((m) => m.member);
      const drainingSet = new Set(g.members.filter((m) => m.draining).map((m) => m.member));
      let hot: Map<string, Hot> | undefined;
      for (const h of g.hotTenants) {
        hot ??= new Map();
        hot.set(
          h.key,
          h.kind === "pin"
            ? { kind: "pin", shard: ShardIdentifier.of(g.group, h.member) }
            : {
                kind: "split",
                splitBy: h.splitBy,
                pool: poolOf(h.members.filter((m) => !drainingSet.has(m))),
              },
        );
      }
      groups.set(g.group, {
        group: g.group,
        name: g.name,
        pool: poolOf(active),
        draining: [...drainingSet].sort((a, b) => a - b),
        hot,
      });
    }
    this.#rules = config.rules.map((r: NormalizedRule) => ({
      index: r.index,
      name: r.name,
      fields: r.conditions.map((c) => c.field),
      tests: r.conditions.map((c: NormalizedCondition) => ("oneOf" in c ? new Set(c.oneOf) : c.equals)),
      group: groups.get(r.group)!,
    }));
    this.#defaultGroup = config.defaultGroup === undefined ? undefined : groups.get(config.defaultGroup);
    this.#ruleFields = [...new Set(config.rules.flatMap((r) => r.conditions.map((c) => c.field)))];
  }

  select(props: Props): ShardIdentifier {
    const row = properties(props);
    const group = this.#matchRule(row)?.group ?? this.#defaultGroup ?? this.#noMatch(row);
    const key = routingValue(row[this.#routingKey], this.#routingKey);
    if (group.hot !== undefined) {
      const hot = group.hot.get(key);
      if (hot !== undefined) {
        if (hot.kind === "pin") return hot.shard;
        return shardOf(hot.pool, murmur3(routingValue(row[hot.splitBy], hot.splitBy)));
      }
    }
    return shardOf(group.pool, murmur3(key));
  }

  explain(props: Props): SelectionExplanation {
    const row = properties(props);
    const rule = this.#matchRule(row);
    const group = rule?.group ?? this.#defaultGroup ?? this.#noMatch(row);
    const named = group.name === undefined ? {} : { name: group.name };
    const groupChoice: GroupChoice = rule
      ? {
          by: "rule",
          group: group.group,
          ...named,
          rule: rule.index,
          ...(rule.name === undefined ? {} : { ruleName: rule.name }),
        }
      : { by: "default", group: group.group, ...named };
    const routingKey = this.#routingKey;
    const key = routingValue(row[routingKey], routingKey);
    const hot = group.hot?.get(key);
    let shard: ShardIdentifier;
    let member: MemberChoice;
    if (hot?.kind === "pin") {
      shard = hot.shard;
      member = { by: "pin", member: shard.member, routingKey, key };
    } else if (hot?.kind === "split") {
      const splitKey = routingValue(row[hot.splitBy], hot.splitBy);
      const splitHash = murmur3(splitKey);
      shard = shardOf(hot.pool, splitHash);
      member = {
        by: "split",
        member: shard.member,
        routingKey,
        key,
        splitBy: hot.splitBy,
        splitKey,
        splitHash,
        candidates: [...hot.pool.candidates.members],
      };
    } else {
      const keyHash = murmur3(key);
      shard = shardOf(group.pool, keyHash);
      member = {
        by: "hash",
        member: shard.member,
        routingKey,
        key,
        keyHash,
        candidates: [...group.pool.candidates.members],
        draining: group.draining,
      };
    }
    return { shard, group: groupChoice, member, reason: describe(shard, groupChoice, member, rule) };
  }

  #matchRule(row: Record<string, unknown>): Rule | undefined {
    const rules = this.#rules;
    outer: for (let r = 0; r < rules.length; r++) {
      const rule = rules[r]!;
      const { fields, tests } = rule;
      for (let i = 0; i < fields.length; i++) {
        const value = row[fields[i]!];
        const test = tests[i];
        if (test instanceof Set ? !test.has(value as RuleValue) : value !== test) continue outer;
      }
      return rule;
    }
    return undefined;
  }

  #noMatch(row: Record<string, unknown>): never {
    const seen = this.#ruleFields.map((f) => `${f}=${show(row[f])}`).join(", ");
    throw new NoGroupMatchError(
      `No group rule matches this row (${seen || "no rules"}) and there is no defaultGroup: ` +
        "refusing to guess where it may live",
    );
  }
}

/** The routing-key value as the string that is hashed: strings as they are, numbers and bigints in decimal. */
export function routingValue(value: unknown, property: string): string {
  if (typeof value === "string") {
    if (value.length > 0) return value;
  } else if (typeof value === "number") {
    if (Number.isFinite(value)) return String(value);
    throw invalidKey(property, value);
  } else if (typeof value === "bigint") return String(value);
  else if (value !== undefined && value !== null) throw invalidKey(property, value);
  throw new MissingRoutingKeyError(
    `The row has no ${property} (got ${show(value)}): it is needed to choose the member`,
  );
}

function invalidKey(property: string, value: unknown): InvalidRoutingKeyError {
  return new InvalidRoutingKeyError(
    `${property} must be a non-empty string, a finite number or a bigint, got ${show(value)}`,
  );
}

function show(value: unknown): string {
  if (typeof value === "string")
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint")
    return String(value);
  if (value === null || value === undefined) return String(value);
  return `(${Array.isArray(value) ? "array" : typeof value})`;
}

function hex(n: number): string {
  return `0x${n.toString(16).padStart(8, "0")}`;
}

function describe(
  shard: ShardIdentifier,
  group: GroupChoice,
  member: MemberChoice,
  rule: Rule | undefined,
): string {
  const label = `group ${group.group}${group.name === undefined ? "" : ` ${JSON.stringify(group.name)}`}`;
  const why =
    group.by === "rule"
      ? `by rule ${group.rule}${group.ruleName === undefined ? "" : ` ${JSON.stringify(group.ruleName)}`} (${rule!.fields
          .map((f, i) => {
            const test = rule!.tests[i];
            return test instanceof Set
              ? `${f} in [${[...test].map(show).join(", ")}]`
              : `${f} = ${show(test)}`;
          })
          .join(", ")})`
      : "by defaultGroup (no rule matched)";
  let how: string;
  if (member.by === "pin") how = `pinned for hot tenant ${member.routingKey} ${show(member.key)}`;
  else if (member.by === "split") {
    how =
      `hot tenant ${member.routingKey} ${show(member.key)} pre-split over [${member.candidates.join(", ")}] ` +
      `by rendezvous hash of ${member.splitBy} ${show(member.splitKey)} (murmur3 ${hex(member.splitHash)})`;
  } else {
    how =
      `of [${member.candidates.join(", ")}] by rendezvous hash of ${member.routingKey} ${show(member.key)} ` +
      `(murmur3 ${hex(member.keyHash)})` +
      (member.draining.length > 0 ? `; draining, skipped: [${member.draining.join(", ")}]` : "");
  }
  return `shard ${shard.key}: ${label} ${why}; member ${member.member} ${how}`;
}

/** The row's properties, or `InvalidPropertiesError` for anything that is not a plain object of them. */
function properties(props: unknown): Record<string, unknown> {
  if (typeof props !== "object" || props === null || Array.isArray(props)) {
    const got = props === null ? "null" : Array.isArray(props) ? "an array" : typeof props;
    throw new InvalidPropertiesError(`select() needs the row's properties as an object, got ${got}`);
  }
  return props as Record<string, unknown>;
}
