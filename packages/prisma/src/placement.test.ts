import { ShardIdentifier } from "@shardkit/id";
import { thrownBy } from "@shardkit/vitest-config/errors";
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { shardRegistryFromConfig, shardRegistryFromEnv } from "./config.js";
import { RegistryConfigError } from "./errors.js";
import { PlacementRules, readPlacementRules } from "./placement.js";
import { createShardRegistry } from "./registry.js";

// Placement rules need no database: a client is anything with $disconnect.
const fakeDb = (name: string) => ({ name, $disconnect: vi.fn(async () => {}) });
const createClient = (url: string) => fakeDb(url);
const url = (db: string) => `postgresql://app:secret@10.0.0.1:5432/${db}`;
const named = (db: string) => `postgresql://app:***@10.0.0.1:5432/${db}`;
const issuesOf = (config: unknown) =>
  thrownBy(() => shardRegistryFromConfig(config, { createClient }), RegistryConfigError).issues;

/** eu1 holds 0/0 and 1/0 (region eu), us1 holds 2/0 (region us), spare ch1 (region ch, tier gold). */
const fleet = (extra: Record<string, unknown> = {}) => ({
  shards: [
    { group: 0, member: 0, url: url("eu1"), labels: { region: "eu" } },
    { group: 1, member: 0, url: url("eu1") },
    { group: 2, member: 0, url: url("us1"), labels: { region: "us" } },
  ],
  databases: [{ url: url("ch1"), labels: { region: "ch", tier: "gold" } }],
  ...extra,
});

describe("database labels in the configuration", () => {
  it("every database carries its labels (empty without any); entries of one URL may give them once", () => {
    const registry = shardRegistryFromConfig(fleet(), { createClient });
    expect(registry.databases.map((d) => [d.name, d.labels])).toEqual([
      [named("eu1"), { region: "eu" }],
      [named("us1"), { region: "us" }],
      [named("ch1"), { region: "ch", tier: "gold" }],
    ]);
    expect(Object.isFrozen(registry.databases[0]!.labels)).toBe(true);
    const bare = shardRegistryFromConfig([{ group: 0, member: 0, url: url("a") }], { createClient });
    expect(bare.databases[0]!.labels).toEqual({});
    expect(bare.placement.rules).toEqual([]);
    expect(bare.placement.violation(ShardIdentifier.of(0, 0), {})).toBeUndefined();
  });

  it("entries with one URL that give other labels are refused, with both paths", () => {
    expect(
      issuesOf({
        shards: [
          { group: 0, member: 0, url: url("a"), labels: { region: "eu" } },
          { group: 0, member: 1, url: url("a"), labels: { region: "us" } },
          { group: 0, member: 2, url: url("a"), labels: { region: "eu", tier: "gold" } },
          { group: 0, member: 3, url: url("a"), labels: { region: "eu" } },
        ],
      }),
    ).toEqual([
      `shards[1].labels: region=us differ from the labels region=eu given for the same database (shards[0]); entries with one URL share one database and its labels`,
      `shards[2].labels: region=eu, tier=gold differ from the labels region=eu given for the same database (shards[0]); entries with one URL share one database and its labels`,
    ]);
  });

  it.each([
    [
      "a value that is not a string",
      { region: 1 },
      "shards[0].labels.region: Invalid input: expected string, received number",
    ],
    ["an empty name", { "": "eu" }, "shards[0].labels: a label name must not be empty"],
    ["not an object", "eu", "shards[0].labels: Invalid input: expected record, received string"],
  ])("labels with %s are refused with their path", (_, labels, issue) => {
    expect(issuesOf({ shards: [{ group: 0, member: 0, url: url("a"), labels }] })).toEqual([issue]);
  });

  it("SHARDKIT_SHARDS carries labels and rules as the file form does", () => {
    const registry = shardRegistryFromEnv({
      createClient,
      env: {
        SHARDKIT_SHARDS: JSON.stringify(fleet({ placement: [{ groups: 1, labels: { region: "eu" } }] })),
      },
    });
    expect(registry.databases.map((d) => d.labels.region)).toEqual(["eu", "us", "ch"]);
    expect(registry.placement.rules).toEqual([{ index: 0, groups: [1], labels: { region: ["eu"] } }]);
  });
});

describe("placement rules in the configuration", () => {
  it("reads one group or a list, one value or a list; the registry's rules say which databases may hold a shard", () => {
    const registry = shardRegistryFromConfig(
      fleet({
        placement: [
          { groups: [1, 3], labels: { region: "eu" } },
          { groups: 2, labels: { region: ["us", "ch"] } },
          { groups: [4], labels: { region: ["ch", "eu"], tier: "gold" } },
        ],
      }),
      { createClient },
    );
    expect(registry.placement.rules).toEqual([
      { index: 0, groups: [1, 3], labels: { region: ["eu"] } },
      { index: 1, groups: [2], labels: { region: ["us", "ch"] } },
      { index: 2, groups: [4], labels: { region: ["ch", "eu"], tier: ["gold"] } },
    ]);
    const [eu1, us1, ch1] = registry.databases;
    const allowed = (group: number) =>
      registry.databases
        .filter((d) => registry.placement.allows(ShardIdentifier.of(group, 5), d) === undefined)
        .map((d) => d.name);
    expect(allowed(0)).toEqual([named("eu1"), named("us1"), named("ch1")]); // no rule
    expect(allowed(1)).toEqual([named("eu1")]);
    expect(allowed(2)).toEqual([named("us1"), named("ch1")]);
    expect(allowed(4)).toEqual([named("ch1")]);
    // `allows` is bound: a planner calls it as a plain function.
    const { allows } = registry.placement;
    expect(allows(ShardIdentifier.of(1, 0), us1!)).toBe(
      `placement[0]: group 1 may live only on region=eu; database "${named("us1")}" has region=us`,
    );
    expect(allows(ShardIdentifier.of(4, 0), eu1!)).toBe(
      `placement[2]: group 4 may live only on region=ch or eu, tier=gold; database "${named("eu1")}" has no tier label`,
    );
    expect(registry.placement.violation(ShardIdentifier.of(2, 0), { region: "eu" })).toBe(
      "placement[1]: group 2 may live only on region=us or ch; the database has region=eu",
    );
    expect(allows(ShardIdentifier.of(4, 0), ch1!)).toBeUndefined();
  });

  it("a shard already on a database that breaks its rule is no configuration error (doctor reports it)", () => {
    const registry = shardRegistryFromConfig(
      fleet({ placement: [{ groups: [2], labels: { region: "eu" } }] }),
      {
        createClient,
      },
    );
    const shard = ShardIdentifier.of(2, 0);
    expect(registry.placement.allows(shard, registry.databaseOf(shard))).toMatch(
      /^placement\[0\]: group 2 may live only on region=eu; database ".*\/us1" has region=us$/,
    );
  });

  it.each([
    [
      "a label no database carries",
      [{ groups: [1], labels: { zone: "a", region: "eu" } }],
      [
        "placement[0].labels.zone: unknown label: no database of the configuration has a zone label (they have region, tier)",
      ],
    ],
    [
      "labels no database has together",
      [{ groups: [1, 2], labels: { region: "eu", tier: "gold" } }],
      [
        `placement[0]: names no database: no database of the configuration has region=eu, tier=gold, so groups 1, 2 could live nowhere (${named("eu1")}: region=eu; ${named("us1")}: region=us; ${named("ch1")}: region=ch, tier=gold)`,
      ],
    ],
    [
      "a group under two rules",
      [
        { groups: [1, 2], labels: { region: "eu" } },
        { groups: 3, labels: { region: "us" } },
        { groups: [3, 2], labels: { region: "ch" } },
      ],
      [
        "placement[2].groups[0]: group 3 is already under placement[1].groups; a group is under one rule (merge them)",
        "placement[2].groups[1]: group 2 is already under placement[0].groups[1]; a group is under one rule (merge them)",
      ],
    ],
    [
      "no label named",
      [{ groups: [1], labels: {} }],
      ["placement[0].labels: name at least one label the databases must have"],
    ],
    [
      "bad types",
      [
        { groups: "1", labels: { region: "eu" } },
        { groups: [300], labels: { region: "eu" } },
        { groups: [], labels: { region: "eu" } },
        { groups: [1], labels: { region: [] } },
        { groups: [1], labels: { region: 7 } },
        { groups: [1] },
        { groups: [1], labels: { region: "eu" }, weight: 2 },
      ],
      [
        "placement[0].groups: expected a group (0..255) or a non-empty list of groups",
        "placement[1].groups[0]: Too big: expected number to be <=255",
        "placement[2].groups: Too small: expected array to have >=1 items",
        "placement[3].labels.region: Too small: expected array to have >=1 items",
        "placement[4].labels.region: expected a label value or a non-empty list of values",
        "placement[5].labels: Invalid input: expected record, received undefined",
        'placement[6]: Unrecognized key: "weight"',
      ],
    ],
  ])("refuses %s, naming its path", (_, placement, issues) => {
    expect(issuesOf(fleet({ placement }))).toEqual(issues);
  });

  it("a placement that is not a list is refused; its problems come with the others of the configuration", () => {
    expect(issuesOf(fleet({ placement: { groups: 1 } }))).toEqual([
      "placement: Invalid input: expected array, received object",
    ]);
    expect(
      issuesOf({
        ...fleet({
          placement: [
            { groups: [1], labels: { zone: "a" } },
            { groups: [1], labels: { region: 5 } },
          ],
        }),
        shards: [...fleet().shards, { group: 0, member: 0, url: url("x") }],
      }),
    ).toEqual([
      "placement[1].labels.region: expected a label value or a non-empty list of values",
      "shards[3]: duplicate shard 0/0 (also shards[0])",
      "placement[0].labels.zone: unknown label: no database of the configuration has a zone label (they have region, tier)",
    ]);
  });
});

describe("createShardRegistry: labels and rules in code", () => {
  const eu = fakeDb("eu");
  const us = fakeDb("us");
  it("takes labels per database and rules, checked as the configuration's are", () => {
    const registry = createShardRegistry({
      shards: [
        { shard: "0/0", client: eu },
        { shard: "1/0", client: us },
      ],
      databases: [
        { client: eu, name: "eu", labels: { region: "eu" } },
        { client: us, name: "us", labels: { region: "us" } },
      ],
      placement: [{ groups: [0], labels: { region: "eu" } }],
    });
    expect(registry.databases.map((d) => [d.name, d.labels])).toEqual([
      ["eu", { region: "eu" }],
      ["us", { region: "us" }],
    ]);
    expect(registry.placement.allows(ShardIdentifier.of(0, 9), registry.databases[1]!)).toBe(
      'placement[0]: group 0 may live only on region=eu; database "us" has region=us',
    );
    expect(
      thrownBy(
        () =>
          createShardRegistry({
            shards: [{ shard: "0/0", client: eu }],
            databases: [
              { client: eu, labels: { region: "eu" } },
              { client: eu, labels: { region: "us" } },
              { client: us, labels: { region: 1 as unknown as string } },
            ],
          }),
        RegistryConfigError,
      ).issues,
    ).toEqual([
      "databases[1].labels: differ from the labels given for the same client in databases[0]",
      'databases[2].labels: expected { [name]: string } with non-empty names, got {"region":1}',
    ]);
    expect(
      thrownBy(
        () =>
          createShardRegistry({
            shards: [{ shard: "0/0", client: eu }],
            placement: [{ groups: 0, labels: { region: "eu" } }],
          }),
        RegistryConfigError,
      ).issues,
    ).toEqual([
      "placement[0].labels.region: unknown label: no database of the configuration has a region label",
    ]);
  });
});

describe("PlacementRules.violation", () => {
  const NAMES = ["region", "tier", "zone"];
  const VALUES = ["a", "b", "c"];
  const labelsArb = fc.dictionary(fc.constantFrom(...NAMES), fc.constantFrom(...VALUES), { maxKeys: 3 });
  const ruleLabelsArb = fc.dictionary(
    fc.constantFrom(...NAMES),
    fc.uniqueArray(fc.constantFrom(...VALUES), { minLength: 1, maxLength: 3 }),
    { minKeys: 1, maxKeys: 3 },
  );

  it("is undefined exactly when the group has no rule or the database matches every label of its rule", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            groups: fc.uniqueArray(fc.integer({ min: 0, max: 7 }), { minLength: 1, maxLength: 3 }),
            labels: ruleLabelsArb,
          }),
          {
            maxLength: 4,
          },
        ),
        fc.integer({ min: 0, max: 7 }),
        fc.integer({ min: 0, max: 63 }),
        labelsArb,
        (input, group, member, labels) => {
          // Each group under the first rule that lists it (the others would be refused by the check).
          const taken = new Set<number>();
          const rules = input.map((r, index) => {
            const groups = r.groups.filter((g) => !taken.has(g));
            for (const g of groups) taken.add(g);
            return { index, groups, labels: r.labels };
          });
          const placement = new PlacementRules(rules);
          const rule = rules.find((r) => r.groups.includes(group));
          const matches =
            rule === undefined ||
            Object.entries(rule.labels).every(([n, vs]) => n in labels && vs.includes(labels[n]!));
          const violation = placement.violation(ShardIdentifier.of(group, member), labels, "db");
          expect(violation === undefined).toBe(matches);
          if (violation !== undefined)
            expect(violation).toMatch(new RegExp(`^placement\\[${rule!.index}\\]: group ${group} `));
        },
      ),
    );
  });

  it("rules read from the same input are the same, in code or from the configuration", () => {
    const databases = [{ name: "d", labels: { region: "eu" } }];
    const { rules, issues } = readPlacementRules(
      [{ groups: [1, 1], labels: { region: ["eu", "eu"] } }],
      databases,
    );
    expect(issues).toEqual([
      "placement[0].groups[1]: group 1 is already under placement[0].groups[0]; a group is under one rule (merge them)",
    ]);
    expect(rules.rules).toEqual([{ index: 0, groups: [1], labels: { region: ["eu"] } }]);
  });
});
