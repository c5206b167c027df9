// Placement rules: which databases the data of a shard group may live on, by the databases' labels
// (`{ region: "eu" }`). Pure: the registry builds them from its configuration, moves and balancers
// ask them before they place a shard, and `shardkit doctor` reports shards that already break them.
import { MAX_GROUP, type ShardIdentifier } from "@shardkit/id";
import { z } from "zod";

/** A database's labels: name -> value, e.g. `{ region: "eu", tier: "gold" }` (empty when none). */
export type DatabaseLabels = Readonly<Record<string, string>>;

/** Labels as a database entry gives them (`labels: { region: "eu" }`). */
export const labelsSchema = z
  .record(z.string(), z.string())
  .refine((labels) => !Object.hasOwn(labels, ""), { error: "a label name must not be empty" });

/**
 * One placement rule as configured: the data of `groups` (one group or a list) may live only on
 * databases whose labels match every label named, a value list meaning any of its values:
 * `{ groups: [1, 2], labels: { region: ["eu", "ch"] } }`.
 */
export const placementRuleSchema = z.strictObject({
  groups: z.union([z.int().min(0).max(MAX_GROUP), z.array(z.int().min(0).max(MAX_GROUP)).min(1)], {
    error: `expected a group (0..${MAX_GROUP}) or a non-empty list of groups`,
  }),
  labels: z
    .record(
      z.string(),
      z.union([z.string(), z.array(z.string()).min(1)], {
        error: "expected a label value or a non-empty list of values",
      }),
    )
    .refine((labels) => !Object.hasOwn(labels, ""), { error: "a label name must not be empty" }),
});

/** A placement rule as given to `createShardRegistry` or in the configuration's `placement`. */
export type PlacementRuleInput = z.input<typeof placementRuleSchema>;

/** A placement rule, read: its groups, and for each label it names the values allowed. */
export interface PlacementRule {
  /** Its position in the configuration's `placement` list (messages name it `placement[index]`). */
  index: number;
  groups: readonly number[];
  labels: Readonly<Record<string, readonly string[]>>;
}

/** What the placement rules are asked about a database: its name (for messages) and its labels. */
export interface LabelledDatabase {
  name: string;
  labels: DatabaseLabels;
}

/**
 * The placement rules as one check (`registry.placement.allows`), as a planner takes them: why
 * `database` may not hold `shard` (the rule it breaks and what the database has), or undefined
 * when it may.
 */
export type PlacementCheck = (shard: ShardIdentifier, database: LabelledDatabase) => string | undefined;

/**
 * The placement rules of a registry (`registry.placement`): each shard group is under at most one
 * rule. `violation` says why a database may not hold a shard (undefined: it may); `allows` is the
 * same as a bound function over `{ name, labels }` (a `Database` is one), to hand to a planner.
 */
export class PlacementRules {
  /** The rules, in the order configured. */
  readonly rules: readonly PlacementRule[];
  private readonly byGroup = new Map<number, PlacementRule>();

  constructor(rules: readonly PlacementRule[] = []) {
    this.rules = Object.freeze(rules.map((rule) => Object.freeze({ ...rule })));
    for (const rule of this.rules) for (const group of rule.groups) this.byGroup.set(group, rule);
  }

  /** No rule: every database may hold every shard. */
  get empty(): boolean {
    return this.rules.length === 0;
  }

  /** The rule that governs the group's data, if any. */
  ruleFor(group: number): PlacementRule | undefined {
    return this.byGroup.get(group);
  }

  /**
   * Why a database with `labels` may not hold `shard`: the rule it breaks and what the database has
   * (`placement[0]: group 1 may live only on region=eu; database "db3" has region=us`), or
   * undefined when it may (no rule for the shard's group, or every label of the rule matches).
   * `database` names the database in the message.
   */
  violation(shard: ShardIdentifier, labels: DatabaseLabels, database?: string): string | undefined {
    const rule = this.byGroup.get(shard.group);
    if (!rule) return undefined;
    const broken = brokenLabels(rule, labels);
    if (broken.length === 0) return undefined;
    const has = broken
      .map(([name]) => (Object.hasOwn(labels, name) ? `${name}=${labels[name]}` : `no ${name} label`))
      .join(", ");
    return `placement[${rule.index}]: group ${shard.group} may live only on ${describeLabels(rule.labels)}; ${database === undefined ? "the database" : `database "${database}"`} has ${has}`;
  }

  /**
   * `violation` for a database given as `{ name, labels }` (a registry's `Database`): bound, so
   * `planBalance({ ..., allows: registry.placement.allows })` works as it is.
   */
  readonly allows: PlacementCheck = (shard, database) =>
    this.violation(shard, database.labels, database.name);
}

/** `region=eu, tier=gold or silver`: a rule's labels for messages. */
export function describeLabels(labels: Readonly<Record<string, readonly string[]>>): string {
  return Object.entries(labels)
    .map(([name, values]) => `${name}=${values.join(" or ")}`)
    .join(", ");
}

/** A database's labels for messages: `region=eu, tier=gold`, or `no labels`. */
export function formatLabels(labels: DatabaseLabels): string {
  const entries = Object.entries(labels);
  return entries.length === 0 ? "no labels" : entries.map(([n, v]) => `${n}=${v}`).join(", ");
}

/** Labels read and frozen (a copy); undefined: none. */
export function freezeLabels(labels: Record<string, string> | undefined): DatabaseLabels {
  return Object.freeze({ ...(labels ?? {}) });
}

/** Two label sets with the same names and values. */
export function sameLabels(a: DatabaseLabels, b: DatabaseLabels): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && b[k] === a[k]);
}

/**
 * Reads placement rules against the databases they are for, with every problem found: a rule that
 * cannot be read (its path, as zod says), a group under two rules, a rule naming no label, a label
 * no database carries ("unknown label"), a rule whose labels no database matches ("names no
 * database"). `rules` entries that are null were refused by an earlier check (their issues are
 * reported already); `parse` false skips the type checks (the configuration's schema made them).
 */
export function readPlacementRules(
  input: unknown,
  databases: readonly LabelledDatabase[],
  options: { path?: string; parse?: boolean } = {},
): { rules: PlacementRules; issues: string[] } {
  const path = options.path ?? "placement";
  const issues: string[] = [];
  if (input === undefined) return { rules: new PlacementRules(), issues };
  if (!Array.isArray(input)) {
    if (options.parse !== false) issues.push(`${path}: expected an array of { groups, labels }`);
    return { rules: new PlacementRules(), issues };
  }
  const rules: PlacementRule[] = [];
  const groupAt = new Map<number, string>();
  const known = new Set(databases.flatMap((d) => Object.keys(d.labels)));
  input.forEach((raw, i) => {
    const at = `${path}[${i}]`;
    if (raw === null || raw === undefined) return;
    const parsed = placementRuleSchema.safeParse(raw);
    if (!parsed.success) {
      if (options.parse !== false)
        for (const issue of parsed.error.issues)
          issues.push(`${at}${formatSubPath(issue.path)}: ${issue.message}`);
      return;
    }
    const groups = typeof parsed.data.groups === "number" ? [parsed.data.groups] : parsed.data.groups;
    const labels = Object.fromEntries(
      Object.entries(parsed.data.labels).map(([name, v]) => [
        name,
        Object.freeze(typeof v === "string" ? [v] : [...new Set(v)]),
      ]),
    );
    const unique: number[] = [];
    groups.forEach((group, j) => {
      const groupPath = typeof parsed.data.groups === "number" ? `${at}.groups` : `${at}.groups[${j}]`;
      const before = groupAt.get(group);
      if (before !== undefined) {
        issues.push(
          `${groupPath}: group ${group} is already under ${before}; a group is under one rule (merge them)`,
        );
        return;
      }
      groupAt.set(group, groupPath);
      unique.push(group);
    });
    const names = Object.keys(labels);
    if (names.length === 0) issues.push(`${at}.labels: name at least one label the databases must have`);
    const unknown = names.filter((name) => !known.has(name));
    for (const name of unknown)
      issues.push(
        `${at}.labels.${name}: unknown label: no database of the configuration has a ${name} label${known.size > 0 ? ` (they have ${[...known].join(", ")})` : ""}`,
      );
    if (names.length > 0 && unknown.length === 0) {
      const rule: PlacementRule = { index: i, groups: unique, labels };
      if (!databases.some((d) => brokenLabels(rule, d.labels).length === 0))
        issues.push(
          `${at}: names no database: no database of the configuration has ${describeLabels(labels)}, so group${unique.length === 1 ? "" : "s"} ${unique.join(", ")} could live nowhere (${databases.map((d) => `${d.name}: ${formatLabels(d.labels)}`).join("; ")})`,
        );
    }
    rules.push({ index: i, groups: Object.freeze(unique), labels: Object.freeze(labels) });
  });
  return { rules: new PlacementRules(rules), issues };
}

/** The labels of `rule` that `labels` do not match (absent, or with a value the rule does not allow). */
function brokenLabels(rule: PlacementRule, labels: DatabaseLabels): [string, readonly string[]][] {
  return Object.entries(rule.labels).filter(([name, values]) => {
    const value = Object.hasOwn(labels, name) ? labels[name] : undefined;
    return value === undefined || !values.includes(value);
  });
}

function formatSubPath(path: PropertyKey[]): string {
  return path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("");
}
