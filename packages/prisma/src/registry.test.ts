import { InvalidShardedIdError, ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { thrownBy } from "@shardkit/vitest-config/errors";
import { describe, expect, it, vi } from "vitest";
import { shardRegistryFromConfig, shardRegistryFromEnv } from "./config.js";
import { RegistryConfigError, UnknownShardError } from "./errors.js";
import { createShardRegistry } from "./registry.js";

/** Registry tests need no database: a client is anything with $disconnect. */
const fakeDb = (name: string) => ({ name, $disconnect: vi.fn(async () => {}) });

const issuesOf = (fn: () => unknown) => thrownBy(fn, RegistryConfigError).issues;

describe("createShardRegistry", () => {
  const a = fakeDb("a");
  const b = fakeDb("b");
  const registry = createShardRegistry({
    shards: [
      { shard: "1/0", client: b },
      { shard: ShardIdentifier.of(0, 1), client: a },
      { shard: { group: 0, member: 0 }, client: a },
    ],
  });

  it("keeps one entry per physical database, shards ordered by bits", () => {
    expect(registry.shards.map((s) => s.key)).toEqual(["0/0", "0/1", "1/0"]);
    expect(registry.databases.map((p) => [p.client, p.shards.map((s) => s.key)])).toEqual([
      [a, ["0/0", "0/1"]],
      [b, ["1/0"]],
    ]);
  });

  it("resolves shards, keys and sharded IDs to their database", () => {
    expect(registry.clientFor(ShardIdentifier.of(0, 1))).toBe(a);
    expect(registry.clientFor("1/0")).toBe(b);
    expect(registry.clientFor(ShardedUUID.generate(ShardIdentifier.of(1, 0)))).toBe(b);
  });

  it("unknown shards fail by default", () => {
    expect(() => registry.clientFor("2/0")).toThrow(UnknownShardError);
    expect(() => registry.clientFor(ShardedUUID.generate(ShardIdentifier.of(0, 9)))).toThrow(
      /Shard 0\/9 is not in the registry \(it has 0\/0, 0\/1, 1\/0\)/,
    );
    expect(() => registry.clientFor("0f8fad5b-d9cb-469f-a165-70867728950e")).toThrow(InvalidShardedIdError);
  });

  it("unknownShard 'default' must be chosen explicitly, routes to the default shard and logs", () => {
    const warn = vi.fn();
    const lenient = createShardRegistry({
      shards: [{ shard: "0/0", client: a }],
      defaultShard: "0/0",
      unknownShard: "default",
      logger: { warn },
    });
    expect(lenient.resolve("3/3")).toBe(ShardIdentifier.DEFAULT);
    expect(warn).toHaveBeenCalledWith(
      expect.stringMatching(/shard 3\/3 is not in the registry; routing to default shard 0\/0/),
    );
  });

  it("reports every configuration problem at once", () => {
    expect(
      issuesOf(() =>
        createShardRegistry({
          shards: [
            { shard: "0/0", client: a },
            { shard: "0/0", client: b },
            { shard: "300/0", client: a },
            { shard: "0/1", client: {} as never },
          ],
          defaultShard: "5/5",
        }),
      ),
    ).toEqual([
      "shards[1].shard: duplicate shard 0/0 (also shards[0])",
      "shards[2].shard: Shard group must be an integer 0..255, got 300",
      "shards[3].client: expected a PrismaClient (an object with $disconnect)",
      "defaultShard: 5/5 is not one of the registered shards",
    ]);
    expect(issuesOf(() => createShardRegistry({ shards: [] }))).toEqual([
      "shards: at least one shard is required",
    ]);
    expect(
      issuesOf(() => createShardRegistry({ shards: [{ shard: "0/0", client: a }], unknownShard: "default" })),
    ).toEqual(["defaultShard: required when unknownShard is 'default'"]);
  });

  it("disconnects each physical database once", async () => {
    await registry.disconnect();
    expect(a.$disconnect).toHaveBeenCalledTimes(1);
    expect(b.$disconnect).toHaveBeenCalledTimes(1);
  });
});

describe("spare databases and changes of owner (what a partition map applies)", () => {
  it("a database that holds no shard comes last, and a shard assigned to it moves there at a higher epoch", () => {
    const a = fakeDb("a");
    const e = fakeDb("e");
    const registry = createShardRegistry({
      shards: [
        { shard: "0/0", client: a },
        { shard: "0/1", client: a },
      ],
      databases: [{ client: e, name: "e" }],
    });
    expect(registry.databases.map((p) => [p.name, p.shards.map((s) => s.key)])).toEqual([
      ["database #0", ["0/0", "0/1"]],
      ["e", []],
    ]);
    const s01 = ShardIdentifier.of(0, 1);
    expect(registry.epochOf(s01)).toBe(0);
    registry.assign(s01, registry.databases[1]!, 2);
    expect(registry.clientFor(s01)).toBe(e);
    expect(registry.epochOf(s01)).toBe(2);
    expect(registry.databases.map((p) => p.shards.map((s) => s.key))).toEqual([["0/0"], ["0/1"]]);
    // A map never goes back, and one epoch has one owner.
    expect(issuesOf(() => registry.assign(s01, registry.databases[0]!, 1))[0]).toMatch(
      /would go back or give it two owners/,
    );
    expect(issuesOf(() => registry.assign(s01, registry.databases[0]!, 2))[0]).toMatch(
      /would go back or give it two owners/,
    );
    expect(() => registry.assign(ShardIdentifier.of(5, 5), registry.databases[0]!, 3)).toThrow(
      UnknownShardError,
    );
  });
});

describe("shardRegistryFromConfig / FromEnv", () => {
  const url = (db: string) => `postgresql://app:secret@10.0.0.1:5432/${db}`;

  it("spare databases (the targets of moves) come from `databases`: a client each, no shard, after the others", () => {
    const created: [string, string[], number][] = [];
    const registry = shardRegistryFromConfig(
      {
        shards: [{ group: 0, member: 0, url: url("a") }],
        databases: [{ url: url("e"), pool: 4 }],
      },
      {
        createClient: (u, shards, { pool }) => {
          created.push([u, shards.map((s) => s.key), pool]);
          return fakeDb(u);
        },
      },
    );
    expect(created).toEqual([
      [url("a"), ["0/0"], 10],
      [url("e"), [], 4],
    ]);
    expect(registry.databases.map((p) => [p.name, p.shards.length, p.pool])).toEqual([
      ["postgresql://app:***@10.0.0.1:5432/a", 1, 10],
      ["postgresql://app:***@10.0.0.1:5432/e", 0, 4],
    ]);
    expect(
      issuesOf(() =>
        shardRegistryFromConfig(
          {
            shards: [{ group: 0, member: 0, url: url("a") }],
            databases: [{ url: url("a") }, { url: "nope" }],
          },
          { createClient: () => fakeDb("x") },
        ),
      ),
    ).toEqual([
      "databases[0].url: already the database of a shard; list a spare database once, under databases only",
      "databases[1].url: not a URL: nope",
    ]);
  });

  it("builds one client per distinct URL, before any connection", () => {
    const created: [string, string[]][] = [];
    const registry = shardRegistryFromConfig(
      {
        shards: [
          { group: 0, member: 0, url: url("a") },
          { group: 0, member: 1, url: url("a") },
          { group: 1, member: 0, url: url("b") },
        ],
        defaultShard: "0/0",
      },
      {
        createClient: (u, shards) => {
          created.push([u, shards.map((s) => s.key)]);
          return fakeDb(u);
        },
      },
    );
    expect(created).toEqual([
      [url("a"), ["0/0", "0/1"]],
      [url("b"), ["1/0"]],
    ]);
    expect(registry.defaultShard).toBe(ShardIdentifier.DEFAULT);
    expect(registry.databases).toHaveLength(2);
  });

  it("names the path of every problem and never creates a client for a bad config", () => {
    const createClient = vi.fn(() => fakeDb("x"));
    expect(
      issuesOf(() =>
        shardRegistryFromConfig(
          {
            shards: [
              { group: 0, member: 0, url: url("a") },
              { group: 0, member: 0, url: url("b") },
              { group: 0, member: 2, url: "not a url" },
              { group: 0, member: 3, url: "mysql://h/db" },
            ],
            defaultShard: "9/9",
          },
          { createClient },
        ),
      ),
    ).toEqual([
      "shards[1]: duplicate shard 0/0 (also shards[0])",
      "shards[2].url: not a URL: not a url",
      "shards[3].url: scheme mysql: is not one of postgres:, postgresql:",
      "defaultShard: 9/9 is not one of the listed shards",
    ]);
    expect(
      issuesOf(() =>
        shardRegistryFromConfig([{ group: 256, member: 0, url: url("a") }], { createClient }),
      )[0],
    ).toMatch(/^shards\[0\]\.group: /);
    expect(
      issuesOf(() => shardRegistryFromConfig({ shards: [{ group: 0, member: 0 }] }, { createClient }))[0],
    ).toMatch(/^shards\[0\]\.url: /);
    // Problems of several kinds, one of them refused by the schema (pool 0): each is reported.
    expect(
      issuesOf(() =>
        shardRegistryFromConfig(
          [
            { group: 0, member: 0, url: "mysql://h/db" },
            { group: 0, member: 0, url: url("a") },
            { group: 0, member: 1, url: url("a"), pool: 0 },
          ],
          { createClient },
        ),
      ),
    ).toEqual([
      "shards[2].pool: Too small: expected number to be >=1",
      "shards[0].url: scheme mysql: is not one of postgres:, postgresql:",
      "shards[1]: duplicate shard 0/0 (also shards[0])",
    ]);
    expect(createClient).not.toHaveBeenCalled();
  });

  it("hides passwords in URL errors", () => {
    const [issue] = issuesOf(() =>
      shardRegistryFromConfig([{ group: 0, member: 0, url: "postgres://u:hunter2@[bad" }], {
        createClient: () => fakeDb("x"),
      }),
    );
    expect(issue).not.toContain("hunter2");
  });

  it("reads SHARDKIT_SHARDS", () => {
    const env = { SHARDKIT_SHARDS: JSON.stringify([{ group: 2, member: 5, url: url("z") }]) };
    const registry = shardRegistryFromEnv({ env, createClient: (u) => fakeDb(u) });
    expect(registry.shards.map((s) => s.key)).toEqual(["2/5"]);
    expect(issuesOf(() => shardRegistryFromEnv({ env: {}, createClient: () => fakeDb("x") }))).toEqual([
      "SHARDKIT_SHARDS: not set",
    ]);
    expect(
      issuesOf(() =>
        shardRegistryFromEnv({ env: { SHARDKIT_SHARDS: "[" }, createClient: () => fakeDb("x") }),
      )[0],
    ).toMatch(/SHARDKIT_SHARDS: not valid JSON/);
  });
});
