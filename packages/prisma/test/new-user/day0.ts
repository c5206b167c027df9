// Day 0, before shardkit: one database and plain Prisma. IDs come from @default(uuid()): UUIDv4.
import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "./generated/prisma/client.js";

const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) });

const bo = await prisma.user.create({
  data: {
    email: "bo@x.com",
    name: "Bo",
    region: "us",
    posts: { create: [{ title: "Hello" }, { title: "Again" }] },
  },
  include: { posts: true },
});
const cy = await prisma.user.create({
  data: { email: "Cy@X.com", name: "Cy", region: "eu", role: "ADMIN", posts: { create: { title: "Hola" } } },
  include: { posts: true },
});

console.log(
  JSON.stringify({
    users: [bo, cy].map((u) => ({ id: u.id, email: u.email, posts: u.posts.map((p) => p.id) })),
  }),
);
await prisma.$disconnect();
