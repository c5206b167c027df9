// Adopting shardkit: the day-0 database becomes shard 0/0's database, two new databases hold shards
// 0/1 and 1/0. The app's models and queries stay as they were; the router places new rows.
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedUUID } from "@shardkit/id";
import { createShardRegistry, isShardkitError, shardRouting } from "@shardkit/prisma";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { PrismaClient } from "./generated/prisma/client.js";

const urls = ["DATABASE_URL", "DATABASE_URL_0_1", "DATABASE_URL_1_0"].map((name) => {
  const url = process.env[name];
  if (!url) throw new Error(`${name} is not set`);
  return url;
});

// The schema folder (the app's schema.prisma and shardkit.prisma) on every database: the existing
// one gets the shardkit tables, the new ones everything.
await rolloutSchema({
  schema: "prisma",
  targets: urls.map((url, i) => ({ name: `db-${i}`, adapter: new PrismaPg({ connectionString: url }) })),
});

const [c0, c1, c2] = urls.map(
  (url) => new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }),
);
const registry = createShardRegistry({
  shards: [
    { shard: "0/0", client: c0 },
    { shard: "0/1", client: c1 },
    { shard: "1/0", client: c2 },
  ],
});
const db = c0.$extends(
  shardRouting({
    registry,
    legacy: "0/0", // the rows from before (v4 ids) live on 0/0
    models: {
      User: { place: (data) => (data.region === "eu" ? "1/0" : "0/1"), unique: { email: true } },
      Post: { keys: ["id", "authorId"] },
    },
  }),
);

// Claim the emails of the rows from before, so that they stay unique across shards.
const backfill = await db.$backfillClaims("user");

// ---- checks ----
const databases = [c0, c1, c2];
const shardOf = (id: string) => (ShardedUUID.isValid(id) ? ShardedUUID.shardOf(id).key : "not sharded");
/** How many rows with this id each database holds. */
const usersWith = (id: string) => Promise.all(databases.map((c) => c.user.count({ where: { id } })));
const postsWith = (id: string) => Promise.all(databases.map((c) => c.post.count({ where: { id } })));
const refusal = async (write: () => PromiseLike<unknown>) => {
  try {
    await write();
    return "accepted";
  } catch (error) {
    return isShardkitError(error) ? error.code : String(error);
  }
};

// Rows from before: their v4 ids are on 0/0.
const bo = await c0.user.findUniqueOrThrow({ where: { email: "bo@x.com" } });
const cy = await c0.user.findUniqueOrThrow({ where: { email: "Cy@X.com" } });
const boById = await db.user.findUnique({ where: { id: bo.id } });
const boPosts = await db.post.findMany({ where: { authorId: bo.id } });

// New rows: placed by region, children on their parent's shard.
const ana = await db.user.create({
  data: { email: "Ana@x.com", name: "Ana", region: "eu", posts: { create: [{ title: "First" }] } },
  include: { posts: true },
});
const anaPost = ana.posts[0]!;
const dee = await db.user.create({ data: { email: "dee@x.com", name: "Dee", region: "us" } });

// Emails are unique across shards (case folded), old rows' emails included.
const duplicate = await refusal(() =>
  db.user.create({ data: { email: "ANA@x.com", name: "Ana again", region: "us" } }),
);
const duplicateOfOld = await refusal(() =>
  db.user.create({ data: { email: "cy@x.com", name: "Cy again", region: "eu" } }),
);

// Login: a lookup by email finds the row on whichever shard holds it.
const loginNew = await db.user.findUnique({ where: { email: "Ana@X.com" } });
const loginOld = await db.user.findUnique({ where: { email: "cy@x.com" } });

// Children of old users stay with them on 0/0, with sharded ids.
const boPost = await db.post.create({ data: { authorId: bo.id, title: "After sharding" } });
const cyNow = await db.user.update({
  where: { id: cy.id },
  data: { posts: { create: { title: "Nested" } } },
  include: { posts: true },
});
const cyNested = cyNow.posts.find((p) => p.title === "Nested")!;

// A router without a legacy shard refuses a v4 id rather than guess its shard.
const strict = c0.$extends(shardRouting({ registry }));
const withoutLegacy = await refusal(() => strict.user.findUnique({ where: { id: bo.id } }));

const claims = (await Promise.all(databases.map((c) => c.uniqueClaim.findMany()))).flat();

console.log(
  JSON.stringify({
    backfill: { rows: backfill.rows, claimed: backfill.claimed, conflicts: backfill.conflicts.length },
    legacy: {
      ids: [bo.id, cy.id],
      byId: boById && { id: boById.id, email: boById.email, role: boById.role },
      postsByAuthor: boPosts.map((p) => p.id).sort(),
    },
    created: {
      id: ana.id,
      shard: shardOf(ana.id),
      postShards: ana.posts.map((p) => shardOf(p.id)),
      userIn: await usersWith(ana.id),
      postIn: await postsWith(anaPost.id),
    },
    placedUs: { shard: shardOf(dee.id), userIn: await usersWith(dee.id) },
    duplicate,
    duplicateOfOld,
    login: { new: loginNew?.id === ana.id, old: loginOld?.id === cy.id, oldEmail: loginOld?.email },
    legacyChildren: {
      post: shardOf(boPost.id),
      postIn: await postsWith(boPost.id),
      nested: shardOf(cyNested.id),
      nestedIn: await postsWith(cyNested.id),
    },
    withoutLegacy,
    claims: claims.map((c) => `${c.value} ${c.state}`).sort(),
  }),
);
await registry.disconnect();
