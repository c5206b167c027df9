// Starts the allocations service: embedded PGlite shards under ./.data by default, or the
// PostgreSQL shards in SHARDKIT_SHARDS ({ "shards": [{ "group", "member", "url" }, ...],
// "databases": [{ "url" }] } with spare databases for moves). Its partition map polls, so a shard
// moved by another process (a mover) is found at its new owner.
import { join } from "node:path";
import { AllocationService } from "./allocation-service.js";
import { buildApp } from "./app.js";
import { createAuth, MIN_SECRET_LENGTH } from "./auth.js";
import { openServiceRouter } from "./shards.js";

// Every route takes a credential signed with this secret (see auth.ts and the README).
const secret = process.env.ALLOCATIONS_AUTH_SECRET ?? "";
if (secret.length < MIN_SECRET_LENGTH) {
  throw new Error(
    `allocations service: bad environment:\n  - ALLOCATIONS_AUTH_SECRET: required, at least ${MIN_SECRET_LENGTH} characters (the secret credentials are signed with)`,
  );
}
// How long a call waits for its shard's database before answering 503 naming the shard.
const deadline = process.env.ALLOCATIONS_DEADLINE_MS ?? "5000";
const deadlineMs = Number(deadline);
if (!(/^\d+$/.test(deadline) && deadlineMs >= 1 && deadlineMs <= 3_600_000)) {
  throw new Error(
    `allocations service: bad environment:\n  - ALLOCATIONS_DEADLINE_MS: must be a whole number of ms from 1 to 3600000, got ${JSON.stringify(deadline)}`,
  );
}
const router = await openServiceRouter({
  shardsJson: process.env.SHARDKIT_SHARDS,
  dataDir: join(process.cwd(), ".data"),
});
const app = buildApp(new AllocationService(router, { deadlineMs }), {
  auth: createAuth(secret),
  logger: true,
});
const port = Number(process.env.PORT ?? 3000);
if (!(Number.isInteger(port) && port >= 0 && port <= 65_535)) {
  throw new Error(
    `allocations service: PORT must be a port number (0 picks a free one), got ${process.env.PORT}`,
  );
}
const address = await app.listen({ port, host: "127.0.0.1" });
console.error(`allocations service on ${address} (${router.describe})`);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, async () => {
    await app.close();
    await router.close();
    process.exit(0);
  });
}
