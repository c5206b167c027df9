// Starts the wallet service: embedded PGlite shards under ./.data by default, or the PostgreSQL
// shards in SHARDKIT_SHARDS ([{ "group": 0, "member": 0, "url": "postgresql://..." }, ...]).
import { createOutboxRelay } from "@shardkit/prisma";
import { buildApp } from "./app.js";
import { openShards } from "./shards.js";
import { WalletService } from "./wallet-service.js";

const shards = await openShards({ shardsJson: process.env.SHARDKIT_SHARDS });
const service = new WalletService(shards);
const relay = createOutboxRelay({
  registry: shards.registry,
  pollIntervalMs: 200,
  deliver: (message) => service.handle(message),
  onError: (error, where) => console.error(`relay: shards ${where} unavailable: ${(error as Error).message}`),
});
const app = buildApp(service, { logger: true });
relay.start();
const port = Number(process.env.PORT ?? 3000);
await app.listen({ port, host: "127.0.0.1" });
console.error(`wallet service on http://127.0.0.1:${port} (${shards.describe})`);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, async () => {
    await app.close();
    await relay.stop();
    await shards.close();
    process.exit(0);
  });
}
