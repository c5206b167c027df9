import { InvalidShardedIdError, ShardedUUID, ShardIdentifier, shardHash } from "@shardkit/id";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ActionUnit } from "../action.js";
import {
  CrossShardError,
  DirectoryUnavailableError,
  NotInDirectoryError,
  RoutingOptionsError,
  ShardKeyRequiredError,
  UnsupportedShardOperationError,
} from "../errors.js";
import { Executor } from "../executor.js";
import { place } from "../place.js";
import type { Obj, Plan } from "../plan.js";
import { Planner, type PlannerOptions } from "../planner.js";
import type { DataModel } from "../prisma-private.js";
import { createShardRegistry } from "../registry.js";
import { byColumn, byDirectory, byHash, DirectoryCache, type ShardDirectory } from "../strategies.js";
import { type ClaimRecord, canonicalOf } from "../unique.js";

/** The shard the frozen hash places `value` on among `shards`. */
const hashedTo = (value: string, shards: readonly ShardIdentifier[]) => shardHash(shards)(value);

// What an existing Prisma app needs from the planner: legacy IDs, IDs filled in, other routing
// strategies and fields unique across shards. Pure: a hand-built data model, no database.

const scalar = (type: string) => ({ kind: "scalar", type });
const relation = (type: string) => ({ kind: "object", type });
const dataModel: DataModel = {
  models: {
    User: {
      fields: {
        id: scalar("String"),
        email: scalar("String"),
        name: scalar("String"),
        posts: relation("Post"),
      },
    },
    Post: {
      fields: {
        id: scalar("String"),
        authorId: scalar("String"),
        author: relation("User"),
        title: scalar("String"),
        comments: relation("Comment"),
      },
    },
    Comment: {
      fields: {
        id: scalar("String"),
        postId: scalar("String"),
        post: relation("Post"),
        body: scalar("String"),
      },
    },
    Document: { fields: { id: scalar("Int"), tenantId: scalar("String"), title: scalar("String") } },
    Session: { fields: { id: scalar("Int"), token: scalar("String") } },
    Account: { fields: { id: scalar("Int"), externalId: scalar("String") } },
    UniqueClaim: { fields: { scope: scalar("String"), value: scalar("String") } },
    UniqueClaimToken: { fields: { token: scalar("String") } },
  },
};

const S = {
  a: ShardIdentifier.of(0, 0),
  b: ShardIdentifier.of(0, 1),
  c: ShardIdentifier.of(1, 0),
  d: ShardIdentifier.of(1, 1),
};
const client = () => ({ $disconnect: async () => {} });
const [db0, db1, db2] = [client(), client(), client()];
const registry = createShardRegistry({
  shards: [
    { shard: S.a, client: db0 },
    { shard: S.b, client: db1 },
    { shard: S.c, client: db2 },
    { shard: S.d, client: db2 },
  ],
});

const filledId = (shard: ShardIdentifier) =>
  `00000000-0000-7000-${(0x8000 | shard.bits).toString(16)}-000000000000`;
const users = { keys: ["id"], place: (data: Obj) => (data.name === "eu" ? S.c : S.b) };
const posts = { keys: ["id", "authorId"] };
const comments = { keys: ["id", "postId"] };
const make = (options: PlannerOptions = {}, layout = registry) =>
  new Planner(
    dataModel,
    layout,
    { ...options, models: { User: users, Post: posts, Comment: comments, ...options.models } },
    filledId,
  );

const V4 = "3b241101-e2bb-4255-8caf-4136c566a962";
const CUID = "clh3am8hi0000qwer1234abcd";
const id = (shard: ShardIdentifier) => ShardedUUID.generate(shard);

function shardPlan(plan: Plan): Extract<Plan, { kind: "shard" }> {
  if (plan.kind !== "shard")
    throw new Error(
      `expected a shard plan, got ${JSON.stringify(plan.kind)}: ${plan.kind === "refuse" ? plan.error.message : ""}`,
    );
  return plan;
}
function refusal(plan: Plan): Error {
  if (plan.kind !== "refuse") throw new Error(`expected a refusal, got ${plan.kind}`);
  return plan.error;
}

describe("legacy IDs route to the shard the app declares", () => {
  const legacy = make({ legacy: "0/1" });

  it.each([
    ["a v4 UUID", V4],
    ["a cuid", CUID],
  ])("%s is read, updated and deleted on the legacy shard", (_, legacyId) => {
    for (const operation of ["findUnique", "update", "delete"]) {
      const plan = shardPlan(
        legacy.plan("User", operation, { where: { id: legacyId }, data: { name: "x" } }),
      );
      expect(plan.shard).toBe(S.b);
    }
  });

  it("without a declaration a v4 ID is refused, never guessed", () => {
    expect(refusal(make().plan("User", "findUnique", { where: { id: V4 } }))).toBeInstanceOf(
      InvalidShardedIdError,
    );
  });

  it("ShardedUUIDs still route by their own shard", () => {
    expect(shardPlan(legacy.plan("User", "findUnique", { where: { id: id(S.d) } })).shard).toBe(S.d);
  });

  it("a legacy parent's foreign key keeps its children on the legacy shard", () => {
    const plan = shardPlan(legacy.plan("Post", "create", { data: { authorId: V4, title: "t" } }));
    expect(plan.shard).toBe(S.b);
    expect(ShardedUUID.shardOf((plan.args!.data as Obj).id as string)).toBe(S.b);
  });

  it("per model: false refuses legacy IDs of that model only", () => {
    const p = make({ legacy: "0/1", models: { Post: { ...posts, legacy: false } } });
    expect(shardPlan(p.plan("User", "findUnique", { where: { id: V4 } })).shard).toBe(S.b);
    expect(refusal(p.plan("Post", "findUnique", { where: { id: V4 } }))).toBeInstanceOf(
      InvalidShardedIdError,
    );
  });

  it("plain UUIDv7 IDs made before the cut-over are legacy; later ones are ShardedUUIDs", () => {
    const cutover = new Date("2026-06-01T00:00:00Z");
    const p = make({ legacy: { shard: "0/1", uuidv7Before: cutover } });
    // A plain v7 from before the cut-over whose random bits happen to decode as shard 1/1.
    const old = `${(cutover.getTime() - 1000)
      .toString(16)
      .padStart(12, "0")
      .replace(/^(.{8})/, "$1-")}-7abc-${(0x8000 | S.d.bits).toString(16)}-0123456789ab`;
    expect(ShardedUUID.shardOf(old)).toBe(S.d);
    expect(shardPlan(p.plan("User", "findUnique", { where: { id: old } })).shard).toBe(S.b);
    expect(shardPlan(p.plan("User", "findUnique", { where: { id: id(S.d) } })).shard).toBe(S.d);
  });

  it("a legacy shard that is not registered is a config error", () => {
    expect(() => make({ legacy: "5/5" })).toThrow(RoutingOptionsError);
    expect(() => make({ legacy: "5/5" })).toThrow(/legacy: Shard 5\/5 is not in the registry/);
  });
});

describe("IDs filled in", () => {
  const p = make();

  it("a top-level create without an id gets a ShardedUUID on the shard its `place` function picks", () => {
    const plan = shardPlan(p.plan("User", "create", { data: { name: "eu", email: "a@x" } }));
    expect(plan.shard).toBe(S.c);
    expect(place(plan, p.layout).targets[0]!.database).toBe(2);
    expect(plan.args).toEqual({ data: { name: "eu", email: "a@x", id: filledId(S.c) } });
  });

  it("nested creates, however deep, get IDs on their parent's shard", () => {
    const plan = shardPlan(
      p.plan("User", "create", {
        data: {
          name: "us",
          posts: {
            create: [
              { title: "one", comments: { create: { body: "c1" }, createMany: { data: [{ body: "c2" }] } } },
              { title: "two" },
            ],
          },
        },
      }),
    );
    expect(plan.shard).toBe(S.b);
    const data = plan.args!.data as Obj;
    const created = (data.posts as Obj).create as Obj[];
    expect(created.map((x) => x.id)).toEqual([filledId(S.b), filledId(S.b)]);
    const comments = created[0]!.comments as Obj;
    expect((comments.create as Obj).id).toBe(filledId(S.b));
    expect(((comments.createMany as Obj).data as Obj[])[0]!.id).toBe(filledId(S.b));
  });

  it("nested creates under an update, connectOrCreate and upsert are colocated too", () => {
    const user = id(S.d);
    const plan = shardPlan(
      p.plan("User", "update", {
        where: { id: user },
        data: {
          posts: {
            create: { title: "n" },
            connectOrCreate: { where: { id: id(S.d) }, create: { title: "c" } },
            upsert: { where: { id: id(S.d) }, create: { title: "u" }, update: { title: "u2" } },
          },
        },
      }),
    );
    const ops = (plan.args!.data as Obj).posts as Record<string, Obj>;
    expect(ops.create!.id).toBe(filledId(S.d));
    expect((ops.connectOrCreate!.create as Obj).id).toBe(filledId(S.d));
    expect((ops.upsert!.create as Obj).id).toBe(filledId(S.d));
  });

  it("the caller's arguments are not changed", () => {
    const args = { data: { name: "eu", posts: { create: { title: "t" } } } };
    const copy = structuredClone(args);
    p.plan("User", "create", args);
    expect(args).toEqual(copy);
  });

  it("a create with every id given is planned with the caller's own arguments", () => {
    const args = { data: { id: id(S.a), name: "x", posts: { create: { id: id(S.a), title: "t" } } } };
    expect(shardPlan(p.plan("User", "create", args)).args).toBeUndefined();
  });

  it("a nested create with an id on another shard is still refused", () => {
    const error = refusal(
      p.plan("User", "create", { data: { name: "eu", posts: { create: { id: id(S.a), title: "t" } } } }),
    );
    expect(error).toBeInstanceOf(CrossShardError);
  });

  it("createMany places each row", () => {
    const plan = p.plan(
      "User",
      "createMany",
      { data: [{ name: "eu" }, { name: "us" }] },
      { allowCrossShard: true },
    );
    if (plan.kind === "refuse") throw plan.error;
    const { shape, targets } = place(plan, p.layout);
    expect(shape).toBe("split");
    expect(targets.map((t) => (t.args.data as Obj[]).map((r) => r.id))).toEqual([
      [filledId(S.b)],
      [filledId(S.c)],
    ]);
  });

  it("with no place function and several shards, a create without an id is refused before it runs", () => {
    const error = refusal(
      make({ models: { User: { keys: ["id"] } } }).plan("User", "create", { data: { name: "x" } }),
    );
    expect(error).toBeInstanceOf(ShardKeyRequiredError);
    expect(error.message).toMatch(/models\.User\.place/);
  });

  it("with one shard, a create without an id gets an ID on it (single-database mode)", () => {
    const one = createShardRegistry({ shards: [{ shard: S.a, client: db0 }] });
    const plan = shardPlan(
      make({ models: { User: { keys: ["id"] } } }, one).plan("User", "create", { data: { name: "x" } }),
    );
    expect(plan.args).toEqual({ data: { name: "x", id: filledId(S.a) } });
  });

  it("inside a transaction, a create without an id gets an ID on the transaction's shard", () => {
    const plan = shardPlan(
      make({ models: { User: { keys: ["id"] } } }).plan(
        "User",
        "create",
        { data: { name: "x" } },
        { within: S.d },
      ),
    );
    expect(plan.args).toEqual({ data: { name: "x", id: filledId(S.d) } });
  });

  it("a place function that names an unknown shard is refused", () => {
    const p2 = make({ models: { User: { keys: ["id"], place: () => "9/9" } } });
    expect(refusal(p2.plan("User", "create", { data: { name: "x" } })).message).toMatch(
      /9\/9 is not in the registry/,
    );
  });
});

describe("routing strategies for models whose IDs cannot carry the shard", () => {
  const tenants: Record<string, ShardIdentifier> = { acme: S.a, globex: S.c };
  const p = make({
    models: {
      Document: { keys: [byColumn("tenantId", (t) => tenants[t as string] ?? S.b)] },
      Session: { keys: [byHash("token", ["0/0", "0/1", "1/0", "1/1"])] },
    },
  });

  it("by a column through a function of its value (a selector)", () => {
    expect(shardPlan(p.plan("Document", "findMany", { where: { tenantId: "globex" } })).shard).toBe(S.c);
    expect(shardPlan(p.plan("Document", "create", { data: { tenantId: "acme", title: "t" } })).shard).toBe(
      S.a,
    );
  });

  it("by a hash: frozen values", () => {
    const shardOf = (token: string) =>
      shardPlan(p.plan("Session", "findFirst", { where: { token } })).shard.key;
    expect(["alpha", "beta", "gamma", "delta", "epsilon"].map(shardOf)).toEqual([
      hashedTo("alpha", [S.a, S.b, S.c, S.d]).key,
      hashedTo("beta", [S.a, S.b, S.c, S.d]).key,
      hashedTo("gamma", [S.a, S.b, S.c, S.d]).key,
      hashedTo("delta", [S.a, S.b, S.c, S.d]).key,
      hashedTo("epsilon", [S.a, S.b, S.c, S.d]).key,
    ]);
    expect(
      ["alpha", "beta", "gamma", "delta", "epsilon"].map((v) => hashedTo(v, [S.a, S.b, S.c, S.d]).key),
    ).toEqual(["0/0", "0/0", "0/1", "1/1", "0/0"]);
  });

  it("by a hash: values spread evenly", () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 20_000; i++) {
      const key = hashedTo(`user-${i}`, [S.a, S.b, S.c, S.d]).key;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    for (const n of counts.values()) expect(Math.abs(n / 20_000 - 0.25)).toBeLessThan(0.02);
  });

  it("by a hash: adding a shard moves values only to the new shard, about 1/(n+1) of them", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ minLength: 1 }), { minLength: 400, maxLength: 400 }), (values) => {
        const before = [S.a, S.b, S.c];
        const after = [...before, S.d];
        let moved = 0;
        for (const v of values) {
          const from = hashedTo(v, before);
          const to = hashedTo(v, after);
          if (from !== to) {
            expect(to).toBe(S.d);
            moved++;
          }
        }
        return moved / values.length < 0.4;
      }),
      { numRuns: 20 },
    );
  });

  it("by a directory: a lookup first, then the plan with its answer; fresh answers need no lookup", async () => {
    let asked = 0;
    const d = make({
      models: {
        Account: {
          keys: [
            byDirectory("externalId", {
              lookup: (v) => {
                asked++;
                return v === "x1" ? "1/1" : null;
              },
              ttlMs: 60_000,
            }),
          ],
        },
      },
    });
    const where = { where: { externalId: "x1" } };
    const [lookup, ...more] = d.lookups("Account", "findFirst", where);
    expect(more).toEqual([]);
    const answer = await lookup!.run!();
    expect(answer).toBe(S.d);
    expect(d.lookups("Account", "findFirst", where)).toEqual([]);
    expect(shardPlan(d.plan("Account", "findFirst", where)).shard).toBe(S.d);
    expect(asked).toBe(1);
    // Not in the directory: refused, nothing guessed.
    const [missing] = d.lookups("Account", "findFirst", { where: { externalId: "nope" } });
    await expect(missing!.run!()).rejects.toBeInstanceOf(NotInDirectoryError);
    // Planned without its resolve step: refused as the defect it would be, never guessed.
    const unresolved = d.plan("Account", "findFirst", { where: { externalId: "x2" } });
    expect(unresolved.kind === "refuse" && unresolved.error.message).toMatch(/was not answered before/);
  });

  it("a call's resolve step finds every lookup it needs in one reading; planned with the answers, it needs no more", async () => {
    const shards: Record<string, ShardIdentifier> = { o1: S.b, o3: S.d, o4: S.b, o5: S.b, o6: S.d, c1: S.b };
    const asked: string[] = [];
    const directory = (field: string) =>
      byDirectory(field, {
        lookup: (v) => {
          asked.push(v);
          return shards[v] ?? null;
        },
      });
    const d = make({
      models: {
        User: { keys: ["id", directory("name")] },
        Post: { keys: ["id", "authorId", directory("title")] },
      },
    });
    const resolveAll = async (model: string, operation: string, args: Obj, context = {}) => {
      const resolved = new Map<string, unknown>();
      const lookups = d.lookups(model, operation, args, { ...context, resolved });
      await Promise.all(lookups.map(async (l) => resolved.set(l.id, await l.run!())));
      return { plan: d.plan(model, operation, args, { ...context, resolved }), lookups: lookups.length };
    };
    // createMany rows on two directory values: both in one batch (they were one round each).
    const rows = await resolveAll(
      "Post",
      "createMany",
      { data: [{ title: "o1" }, { title: "o3" }] },
      { allowCrossShard: true },
    );
    expect(rows.lookups).toBe(2);
    expect(rows.plan.kind !== "refuse" && place(rows.plan, d.layout).shape).toBe("split");
    // An upsert whose where and create both wait on the directory.
    const upsert = await resolveAll("Post", "upsert", {
      where: { title: "o4" },
      create: { title: "o5" },
      update: {},
    });
    expect(upsert.lookups).toBe(2);
    expect(shardPlan(upsert.plan).shard).toBe(S.b);
    // A nested write's key, read before the parent's shard is known.
    const nested = await resolveAll("User", "update", {
      where: { name: "c1" },
      data: { posts: { connect: { title: "o6" } } },
    });
    expect(nested.lookups).toBe(2);
    expect(nested.plan.kind === "refuse" && nested.plan.error).toBeInstanceOf(CrossShardError);
    // Each value asked once: an answer is cached for the next call.
    expect(asked.sort()).toEqual(["c1", "o1", "o3", "o4", "o5", "o6"]);
    expect(d.lookups("Post", "findFirst", { where: { title: "o6" } })).toEqual([]);
    // A key another key made moot is not looked up: the row's id names the shard.
    const byId = d.lookups("Post", "findFirst", { where: { id: id(S.b), title: "never-asked" } });
    expect(byId).toEqual([]);
    expect(
      shardPlan(d.plan("Post", "findFirst", { where: { id: id(S.b), title: "never-asked" } })).shard,
    ).toBe(S.b);
    expect(asked).not.toContain("never-asked");
    // $action stages synchronously: a write whose directory answer is not cached is refused, saying so.
    const unit = new ActionUnit(new Executor(d));
    expect(() => unit.create("post" as never, { data: { title: "o9" } } as never)).toThrow(
      UnsupportedShardOperationError,
    );
    expect(() => unit.create("post" as never, { data: { title: "o9" } } as never)).toThrow(/not cached/);
    expect(unit.create("post" as never, { data: { title: "o1" } } as never).shards).toEqual([S.b]);
    // Bad input before any lookup: no lookup, and the plan refuses it.
    expect(d.lookups("Post", "findFirst", { where: { id: "not-an-id", title: "o9" } })).toEqual([]);
    expect(d.plan("Post", "findFirst", { where: { id: "not-an-id", title: "o9" } }).kind).toBe("refuse");
  });

  it("a create that claims a unique value and nests a directory-routed row: its lookup is found before planning", async () => {
    const d = make({
      models: {
        User: { ...users, unique: { email: true } },
        Post: {
          keys: ["id", "authorId", byDirectory("title", { lookup: (v) => (v === "o7" ? "1/0" : null) })],
        },
      },
    });
    const args = { data: { name: "eu", email: "ana@x", posts: { create: { title: "o7" } } } };
    const resolved = new Map<string, unknown>();
    const lookups = d.lookups("User", "create", args, { resolved });
    expect(lookups).toHaveLength(1);
    resolved.set(lookups[0]!.id, await lookups[0]!.run!());
    const plan = shardPlan(d.plan("User", "create", args, { resolved }));
    expect(plan.shard).toBe(S.c);
    expect(plan.claims?.map((c) => c.value)).toEqual(["ana@x"]);
  });

  /** The directory "accounts" of `externalId` behind a cache (fresh 1 s, stale up to 10 s) on the clock `now`. */
  const accountsCache = (
    lookup: ShardDirectory["lookup"],
    now: () => number,
    options: Partial<ShardDirectory> = {},
  ) =>
    new DirectoryCache(
      { name: "accounts", lookup, ttlMs: 1000, staleMs: 10_000, ...options },
      "externalId",
      (ref) => registry.resolve(ref as string),
      now,
    );

  it("a directory that is down: stale answers are used up to staleMs, then its keys fail alone", async () => {
    let now = 0;
    let down = false;
    const cache = accountsCache(
      (v) => {
        if (down) throw new Error("connection refused");
        return v === "x1" ? "1/1" : "0/0";
      },
      () => now,
    );
    expect(await cache.lookup("x1")).toBe(S.d);
    now = 2000;
    expect(cache.fresh("x1")).toBeUndefined();
    down = true;
    expect(await cache.lookup("x1")).toBe(S.d); // stale, within staleMs
    await expect(cache.lookup("x2")).rejects.toBeInstanceOf(DirectoryUnavailableError);
    now = 20_000;
    const error = await cache.lookup("x1").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DirectoryUnavailableError);
    expect((error as Error).message).toMatch(/directory accounts did not answer for "x1"/);
    down = false;
    expect(await cache.lookup("x2")).toBe(S.a);
  });

  it("a directory that never answers: past timeoutMs, a stale answer is used, else the value fails as unavailable (never as unknown)", async () => {
    let now = 0;
    let hang = false;
    const signals: AbortSignal[] = [];
    const cache = accountsCache(
      (v, { signal }) => {
        signals.push(signal);
        return hang ? new Promise<never>(() => {}) : v === "x1" ? "1/1" : "0/0";
      },
      () => now,
      { timeoutMs: 50 },
    );
    expect(await cache.lookup("x1")).toBe(S.d);
    now = 2000;
    hang = true;
    expect(await cache.lookup("x1")).toBe(S.d); // stale, within staleMs
    expect(signals.at(-1)!.aborted).toBe(true); // the hung request was told to give up
    const error = await cache.lookup("x2").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DirectoryUnavailableError);
    expect(error).toMatchObject({ value: "x2", timeoutMs: 50 });
    expect((error as Error).message).toBe(
      'directory accounts did not answer for "x2" within 50 ms, and no cached entry was young enough to use',
    );
    hang = false;
    expect(await cache.lookup("x2")).toBe(S.a); // the next call asks again
  });

  it("bad strategy options are listed", () => {
    const error = (() => {
      try {
        make({
          models: {
            Session: { keys: [byHash("token", [])] },
            Document: { keys: [byColumn("nope", () => S.a)] },
          },
        });
      } catch (e) {
        return e as RoutingOptionsError;
      }
    })();
    expect(error).toBeInstanceOf(RoutingOptionsError);
    expect(error!.issues).toEqual([
      "models.Document.keys: Document has no field nope",
      "models.Session.keys[0].shards: expected at least one registered shard",
    ]);
  });
});

describe("fields unique across shards", () => {
  const p = make({ models: { User: { ...users, unique: { email: true } } } });
  const emailClaim = (model: string, operation: string, args: Record<string, unknown>, planner = p) =>
    planner.lookups(model, operation, args)[0]!;

  it("a create takes a claim for the canonical value, placed by its hash", () => {
    const plan = shardPlan(p.plan("User", "create", { data: { name: "eu", email: "Ana@Example.COM" } }));
    expect(plan.claims).toHaveLength(1);
    const claim = plan.claims![0]!;
    expect(claim).toMatchObject({
      scope: "User.email",
      value: "ana@example.com",
      stored: "Ana@Example.COM",
      ownerShard: S.c,
      ownerId: filledId(S.c),
    });
    expect(claim.shard).toBe(hashedTo("User.email\u0000ana@example.com", [S.a, S.b, S.c, S.d]));
  });

  it("canonical forms: case folded and NFKC by default, configurable", () => {
    const claimOf = (planner: Planner, email: string) =>
      shardPlan(planner.plan("User", "create", { data: { email } })).claims![0]!.value;
    expect(claimOf(p, "ＡＮＡ@x.com")).toBe("ana@x.com"); // full-width letters
    // Full case folding: every spelling of a pair is one account.
    for (const pair of [
      ["straße@x.de", "STRASSE@x.de", "strasse@x.de", "STRAẞE@x.de"],
      ["ſam@x", "SAM@x"], // long s
      ["\u212Aim@x", "kim@x"], // Kelvin sign
      ["\u212Bsa@x", "åsa@x", "ÅSA@x"], // Angstrom sign
      ["ΑΡΗΣ@x", "αρης@x", "αρησ@x"], // final sigma
      ["ǅana@x", "Ǆana@x", "ǆana@x"],
      ["ﬁona@x", "FIONA@x"], // ligature
      ["µ@x", "μ@x", "Μ@x"], // micro sign, mu
    ]) {
      expect(new Set(pair.map((email) => claimOf(p, email))), pair.join(" ")).toHaveLength(1);
    }
    expect(claimOf(p, "ODYSSEUS@x")).not.toBe(claimOf(p, "odyseus@x"));
    // Any text: the canonical form is a fixed point, and upper or lower case of the text gives the same.
    const canonical = canonicalOf(true);
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), (text) => {
        const form = canonical(text);
        return (
          canonical(form) === form &&
          canonical(text.toUpperCase()) === form &&
          canonical(text.toLowerCase()) === form
        );
      }),
      { numRuns: 2_000 },
    );
    const exact = make({
      models: { User: { ...users, unique: { email: { caseFold: false, normalize: false } } } },
    });
    expect(claimOf(exact, "Ana@x")).toBe("Ana@x");
    const trimmed = make({
      models: { User: { ...users, unique: { email: { canonical: (v) => v.trim() } } } },
    });
    expect(claimOf(trimmed, " a ")).toBe("a");
  });

  it("where by the field routes through its claim, made exact", () => {
    const lookup = emailClaim("User", "findUnique", { where: { email: "ANA@example.com" } });
    expect(lookup.claim).toMatchObject({ scope: "User.email", value: "ana@example.com" });
    const owner = id(S.d);
    const record: ClaimRecord = {
      ownerShard: S.d.bits,
      ownerId: owner,
      stored: "ana@example.com",
      state: "held",
      token: "t",
    };
    const plan = shardPlan(
      p.plan(
        "User",
        "findUnique",
        { where: { email: "ANA@example.com" } },
        { resolved: new Map([[lookup.id, record]]) },
      ),
    );
    expect(plan.shard).toBe(S.d);
    expect(plan.args).toEqual({ where: { email: "ana@example.com", id: owner } });
    // The rest of the call is kept: an update by email updates that row, with its data.
    const update = shardPlan(
      p.plan(
        "User",
        "update",
        { where: { email: "ana@EXAMPLE.com" }, data: { name: "Ana" }, select: { id: true } },
        { resolved: new Map([[lookup.id, record]]) },
      ),
    );
    expect(update.args).toEqual({
      where: { email: "ana@example.com", id: owner },
      data: { name: "Ana" },
      select: { id: true },
    });
  });

  it("no claim: the legacy shard (rows from before the claims), else the claim's own shard", () => {
    const withLegacy = make({ legacy: "0/0", models: { User: { ...users, unique: { email: true } } } });
    const lookup = emailClaim("User", "findUnique", { where: { email: "z@x" } }, withLegacy);
    const resolved = new Map([[lookup.id, null]]);
    expect(
      shardPlan(withLegacy.plan("User", "findUnique", { where: { email: "z@x" } }, { resolved })).shard,
    ).toBe(S.a);
    expect(shardPlan(p.plan("User", "findUnique", { where: { email: "z@x" } }, { resolved })).shard).toBe(
      lookup.claim!.shard,
    );
  });

  it("an update that sets the field claims the new value for the row", () => {
    const user = id(S.a);
    const plan = shardPlan(p.plan("User", "update", { where: { id: user }, data: { email: "new@x" } }));
    expect(plan.claims![0]).toMatchObject({ value: "new@x", ownerId: user, ownerShard: S.a });
  });

  it("writes that cannot claim are refused: createMany, upsert, updateMany, nested", () => {
    const cases: [string, Obj][] = [
      ["createMany", { data: [{ email: "a@x" }] }],
      ["upsert", { where: { id: id(S.a) }, create: { email: "a@x" }, update: {} }],
      ["updateMany", { where: { name: "x" }, data: { email: "a@x" } }],
    ];
    for (const [operation, args] of cases) {
      expect(refusal(p.plan("User", operation, args, { allowCrossShard: true }))).toBeInstanceOf(
        UnsupportedShardOperationError,
      );
    }
    const nested = refusal(
      p.plan("Post", "create", { data: { id: id(S.a), title: "t", author: { create: { email: "a@x" } } } }),
    );
    expect(nested.message).toMatch(/User\.email is unique across shards and a nested write cannot claim it/);
  });

  it("without the UniqueClaim and UniqueClaimToken models in the schema, unique is a config error naming them", () => {
    const { UniqueClaim: _, ...models } = dataModel.models;
    expect(
      () => new Planner({ models }, registry, { models: { User: { unique: { email: true } } } }),
    ).toThrow(/the UniqueClaim model of/);
    const { UniqueClaimToken: __, ...neither } = models;
    expect(
      () => new Planner({ models: neither }, registry, { models: { User: { unique: { email: true } } } }),
    ).toThrow(/the UniqueClaim and UniqueClaimToken models of/);
  });
});
