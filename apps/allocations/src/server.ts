// Starts the allocations service: embedded PGlite shards under ./.data by default, or the
// PostgreSQL shards in SHARDKIT_SHARDS ({ "shards": [{ "group", "member", "url" }, ...],
// "databases": [{ "url" }] } with spare databases for moves). Its partition map polls, so a shard
// moved by another process (a mover) is found at its new owner.
import { join } from "node:path";
import { authSecret, badEnvironment, portOf, serve } from "@shardkit/service-kit/serve";
import { AllocationService } from "./allocation-service.js";
import { buildApp } from "./app.js";
import { createAuth } from "./auth.js";
import { openServiceRouter } from "./shards.js";

// Every route takes a credential signed with this secret (see auth.ts and the README).
const secret = authSecret("allocations", "ALLOCATIONS_AUTH_SECRET");
// How long a call waits for its shard's database before answering 503 naming the shard.
const deadline = process.env.ALLOCATIONS_DEADLINE_MS ?? "5000";
const deadlineMs = Number(deadline);
if (!(/^\d+$/.test(deadline) && deadlineMs >= 1 && deadlineMs <= 3_600_000)) {
  throw badEnvironment("allocations", [
    `ALLOCATIONS_DEADLINE_MS: must be a whole number of ms from 1 to 3600000, got ${JSON.stringify(deadline)}`,
  ]);
}
const router = await openServiceRouter({
  shardsJson: process.env.SHARDKIT_SHARDS,
  dataDir: join(process.cwd(), ".data"),
});
const app = buildApp(new AllocationService(router, { deadlineMs }), {
  auth: createAuth(secret),
  logger: true,
});
await serve(app, {
  service: "allocations",
  port: portOf("allocations"),
  describe: router.describe,
  close: [() => router.close()],
});
