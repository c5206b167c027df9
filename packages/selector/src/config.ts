import { z } from "zod";
import { InvalidSelectorConfigError } from "./errors.js";

/** A value a rule compares a property with (strict equality: `"1"` is not `1`). */
export type RuleValue = string | number | boolean;

/** One condition of a rule: a value (shorthand for `{ equals }`), `{ equals }` or `{ oneOf }`. */
export type RuleCondition =
  | RuleValue
  | { readonly equals: RuleValue }
  | { readonly oneOf: readonly RuleValue[] };

/** A group rule: when every condition holds, the row goes to `group`. Rules are tried in order. */
export interface GroupRule<Props extends object = Record<string, unknown>> {
  /** Shown by `explain()` and in errors. */
  readonly name?: string;
  /** Property name -> condition; all must hold. A property the row lacks never matches. */
  readonly when: { readonly [K in keyof Props & string]?: RuleCondition };
  readonly group: number;
}

/** A member of a group: its number, or the number with a relative weight and a draining flag. */
export type MemberConfig =
  | number
  | {
      /** 0..63, any numbers (need not be contiguous). */
      readonly member: number;
      /** Relative share of new keys; default 1. */
      readonly weight?: number;
      /** Keeps its rows, takes no new keys; default false. */
      readonly draining?: boolean;
    };

/**
 * A hot tenant of a group, by its routing-key value: either pinned to one `member`, or pre-split
 * over `members` by the hash of a secondary property `splitBy`.
 */
export type HotTenantConfig =
  | { readonly key: string | number; readonly member: number }
  | { readonly key: string | number; readonly members: readonly number[]; readonly splitBy: string };

export interface GroupConfig {
  /** 0..255 */
  readonly group: number;
  /** A label for `explain()` and logs, e.g. "mx-onshore". */
  readonly name?: string;
  readonly members: readonly MemberConfig[];
  readonly hotTenants?: readonly HotTenantConfig[];
}

/** The configuration `createShardSelector` validates. `Props` is the shape of the rows it places. */
export interface ShardSelectorConfig<Props extends object = Record<string, unknown>> {
  /** The property whose value picks the member by consistent hash, e.g. "tenantId". Always required. */
  readonly routingKey: keyof Props & string;
  readonly groups: readonly GroupConfig[];
  /** Ordered: the first rule whose conditions all hold picks the group. */
  readonly rules?: readonly GroupRule<Props>[];
  /** The group of a row no rule matches. Without it, such a row is an error. */
  readonly defaultGroup?: number | undefined;
}

// ---------------------------------------------------------------------------------------------
// Structural schema (zod). Messages are written to read well after the path they belong to.

type Issue = z.core.$ZodRawIssue;

function messages(typeMessage: string) {
  return (issue: Issue) => {
    if (issue.code === "unrecognized_keys") {
      const keys = (issue as { keys: string[] }).keys.map((k) => JSON.stringify(k)).join(", ");
      return `unknown key${(issue as { keys: string[] }).keys.length > 1 ? "s" : ""} ${keys}`;
    }
    if (issue.code === "invalid_type") return typeMessage;
    return undefined;
  };
}

const int = (min: number, max: number) => {
  const message = `must be an integer ${min}..${max}`;
  return z
    .number({ error: message })
    .int({ error: message })
    .min(min, { error: message })
    .max(max, { error: message });
};
const groupNumber = int(0, 255);
const memberNumber = int(0, 63);
const label = z.string({ error: "must be a string" }).min(1, { error: "must not be empty" });
const scalar = z.union([z.string(), z.number(), z.boolean()], {
  error: "must be a string, number or boolean",
});

const memberSchema = z.preprocess(
  (value) => (typeof value === "number" ? { member: value } : value),
  z.strictObject(
    {
      member: memberNumber,
      weight: z.number({ error: "must be a number > 0" }).gt(0, { error: "must be > 0" }).optional(),
      draining: z.boolean({ error: "must be true or false" }).optional(),
    },
    { error: messages("must be a member number 0..63 or { member, weight?, draining? }") },
  ),
);

const hotTenantSchema = z.strictObject(
  {
    key: z.union([label, z.number()], { error: "must be the tenant's routing-key value (string or number)" }),
    member: memberNumber.optional(),
    members: z.array(memberNumber, { error: "must be an array of member numbers" }).optional(),
    splitBy: label.optional(),
  },
  { error: messages("must be { key, member } or { key, members, splitBy }") },
);

const groupSchema = z.strictObject(
  {
    group: groupNumber,
    name: label.optional(),
    members: z
      .array(memberSchema, { error: "must be an array of members" })
      .min(1, { error: "must list at least one member" }),
    hotTenants: z.array(hotTenantSchema, { error: "must be an array" }).optional(),
  },
  { error: messages("must be { group, name?, members, hotTenants? }") },
);

const conditionSchema = z.preprocess(
  (value) => (typeof value === "object" && value !== null ? value : { equals: value }),
  z.strictObject(
    {
      equals: scalar.optional(),
      oneOf: z
        .array(scalar, { error: "must be an array of values" })
        .min(1, { error: "must list at least one value" })
        .optional(),
    },
    { error: messages("must be a value, { equals: value } or { oneOf: [values] }") },
  ),
);

const ruleSchema = z.strictObject(
  {
    name: label.optional(),
    when: z.record(z.string(), conditionSchema, { error: "must be an object of property: condition" }),
    group: groupNumber,
  },
  { error: messages("must be { name?, when, group }") },
);

const configSchema = z.strictObject(
  {
    routingKey: z
      .string({ error: 'must be the name of the property to hash, e.g. "tenantId"' })
      .min(1, { error: "must not be empty" }),
    groups: z
      .array(groupSchema, { error: "must be an array of groups" })
      .min(1, { error: "must list at least one group" }),
    rules: z.array(ruleSchema, { error: "must be an array of rules" }).optional(),
    defaultGroup: groupNumber.optional(),
  },
  { error: messages("must be an object { routingKey, groups, rules?, defaultGroup? }") },
);

// ---------------------------------------------------------------------------------------------
// Normalized config: what the selector compiles.

export interface NormalizedMember {
  readonly member: number;
  readonly weight: number;
  readonly draining: boolean;
}
export type NormalizedHotTenant =
  | { readonly kind: "pin"; readonly key: string; readonly member: number }
  | {
      readonly kind: "split";
      readonly key: string;
      readonly members: readonly number[];
      readonly splitBy: string;
    };
export interface NormalizedGroup {
  readonly group: number;
  readonly name: string | undefined;
  readonly members: readonly NormalizedMember[];
  readonly hotTenants: readonly NormalizedHotTenant[];
}
export type NormalizedCondition =
  | { readonly field: string; readonly equals: RuleValue }
  | { readonly field: string; readonly oneOf: readonly RuleValue[] };
export interface NormalizedRule {
  readonly index: number;
  readonly name: string | undefined;
  readonly conditions: readonly NormalizedCondition[];
  readonly group: number;
}
export interface NormalizedConfig {
  readonly routingKey: string;
  readonly groups: readonly NormalizedGroup[];
  readonly rules: readonly NormalizedRule[];
  readonly defaultGroup: number | undefined;
}

type PathPart = string | number | symbol;

/** `["groups", 1, "members", 3, "weight"]` -> `groups[1].members[3].weight`. */
export function formatPath(path: readonly PathPart[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else if (typeof part === "string" && /^[A-Za-z_$][\w$]*$/.test(part)) out += out ? `.${part}` : part;
    else out += `[${JSON.stringify(String(part))}]`;
  }
  return out || "config";
}

/**
 * Validates `input` and returns the normalized config, or throws `InvalidSelectorConfigError`
 * (`INVALID_SELECTOR_CONFIG`) listing every issue.
 * Longer than 80 lines: every rule checked in one pass, each problem named with its path.
 */
export function parseConfig(input: unknown): NormalizedConfig {
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    fail(parsed.error.issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`));
  }
  const config = parsed.data;
  const issues: string[] = [];
  const report = (path: PathPart[], message: string) => issues.push(`${formatPath(path)}: ${message}`);

  const declared = new Map<number, number>(); // group -> index
  const groups: NormalizedGroup[] = config.groups.map((g, gi) => {
    const seen = declared.get(g.group);
    if (seen !== undefined)
      report(["groups", gi, "group"], `group ${g.group} is already declared by groups[${seen}]`);
    else declared.set(g.group, gi);

    const byNumber = new Map<number, NormalizedMember>();
    const members = g.members.map((m, mi) => {
      const member = { member: m.member, weight: m.weight ?? 1, draining: m.draining ?? false };
      if (byNumber.has(m.member))
        report(["groups", gi, "members", mi, "member"], `member ${m.member} is listed twice`);
      else byNumber.set(m.member, member);
      return member;
    });
    if (members.every((m) => m.draining)) {
      report(["groups", gi, "members"], "every member is draining: the group could take no new rows");
    }

    const hotKeys = new Map<string, number>();
    const hotTenants: NormalizedHotTenant[] = [];
    (g.hotTenants ?? []).forEach((h, hi) => {
      const at = ["groups", gi, "hotTenants", hi];
      const key = String(h.key);
      const previous = hotKeys.get(key);
      if (previous !== undefined)
        report([...at, "key"], `tenant ${JSON.stringify(key)} is already listed at hotTenants[${previous}]`);
      else hotKeys.set(key, hi);
      const check = (member: number, path: PathPart[]): boolean => {
        const m = byNumber.get(member);
        if (!m) report(path, `member ${member} is not a member of group ${g.group}`);
        else if (m.draining) report(path, `member ${member} is draining: it takes no new rows`);
        return m !== undefined && !m.draining;
      };
      if (h.member !== undefined) {
        if (h.members !== undefined || h.splitBy !== undefined) {
          report(at, "has both member (pin) and members/splitBy (pre-split): choose one");
          return;
        }
        check(h.member, [...at, "member"]);
        hotTenants.push({ kind: "pin", key, member: h.member });
        return;
      }
      if (h.members === undefined || h.splitBy === undefined) {
        report(at, "needs member (pin) or both members and splitBy (pre-split)");
        return;
      }
      if (h.members.length === 0) report([...at, "members"], "must list at least one member");
      const unique = new Set<number>();
      let usable = 0;
      h.members.forEach((member, i) => {
        if (unique.has(member)) report([...at, "members", i], `member ${member} is listed twice`);
        unique.add(member);
        const m = byNumber.get(member);
        if (!m) report([...at, "members", i], `member ${member} is not a member of group ${g.group}`);
        else if (!m.draining) usable++;
      });
      if (h.members.length > 0 && usable === 0 && h.members.every((m) => byNumber.has(m))) {
        report([...at, "members"], "every member is draining: the tenant could take no new rows");
      }
      if (h.splitBy === config.routingKey) {
        report([...at, "splitBy"], `must differ from routingKey ${JSON.stringify(config.routingKey)}`);
      }
      hotTenants.push({ kind: "split", key, members: [...unique], splitBy: h.splitBy });
    });
    return { group: g.group, name: g.name, members, hotTenants };
  });

  const rules: NormalizedRule[] = (config.rules ?? []).map((r, ri) => {
    const conditions: NormalizedCondition[] = [];
    const fields = Object.keys(r.when);
    if (fields.length === 0) report(["rules", ri, "when"], "must name at least one property");
    for (const field of fields) {
      const c = r.when[field]!;
      if ((c.equals === undefined) === (c.oneOf === undefined)) {
        report(["rules", ri, "when", field], "must be a value, { equals: value } or { oneOf: [values] }");
      } else if (c.oneOf !== undefined) conditions.push({ field, oneOf: c.oneOf });
      else conditions.push({ field, equals: c.equals! });
    }
    if (!declared.has(r.group)) report(["rules", ri, "group"], `group ${r.group} is not declared in groups`);
    return { index: ri, name: r.name, conditions, group: r.group };
  });

  if (config.defaultGroup !== undefined && !declared.has(config.defaultGroup)) {
    report(["defaultGroup"], `group ${config.defaultGroup} is not declared in groups`);
  }
  if (issues.length > 0) fail(issues);
  return { routingKey: config.routingKey, groups, rules, defaultGroup: config.defaultGroup };
}

function fail(issues: string[]): never {
  throw new InvalidSelectorConfigError([...new Set(issues)]);
}
