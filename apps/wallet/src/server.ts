// Starts the wallet service: embedded PGlite shards under ./.data by default, or the PostgreSQL
// shards in SHARDKIT_SHARDS ([{ "group": 0, "member": 0, "url": "postgresql://..." }, ...]).
// Settings come from the environment (see config.ts and the README). A shard database that is
// down at start does not stop the service: its shards answer 503 until it is back.
import { createOutboxRelay } from "@shardkit/prisma";
import { logRelayError, serve } from "@shardkit/service-kit/serve";
import { buildApp } from "./app.js";
import { createAuth } from "./auth.js";
import { serverConfig } from "./config.js";
import { openShards } from "./shards.js";
import { WalletService } from "./wallet-service.js";

const config = serverConfig(process.env);
const shards = await openShards({ shardsJson: config.SHARDKIT_SHARDS });
const service = new WalletService(shards, { deadlineMs: config.WALLET_DEADLINE_MS });
const relay = createOutboxRelay({
  registry: shards.registry,
  pollIntervalMs: config.RELAY_POLL_INTERVAL_MS,
  maxAttempts: config.RELAY_MAX_ATTEMPTS,
  backoff: { baseMs: config.RELAY_BACKOFF_BASE_MS, maxMs: config.RELAY_BACKOFF_MAX_MS },
  deliveryTimeoutMs: config.RELAY_DELIVERY_TIMEOUT_MS,
  leaseMs: config.RELAY_LEASE_MS,
  deliver: (message) => service.handle(message),
  onError: logRelayError,
});
const app = buildApp(service, { auth: createAuth(config.WALLET_AUTH_SECRET), logger: true });
relay.start();
await serve(app, {
  service: "wallet",
  port: config.PORT,
  describe: shards.describe,
  close: [() => relay.stop(), () => shards.close()],
});
