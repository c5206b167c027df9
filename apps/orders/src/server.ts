// Starts the orders service: embedded PGlite shards under ./.data by default, or the PostgreSQL
// shards in SHARDKIT_SHARDS ([{ "group": 0, "member": 0, "url": "postgresql://..." }, ...]).
// A shard database that is down at start does not stop the service: its shards answer 503 until
// it is back. The relay hands every outbox event (order.placed, order.cancelled) to `publish`: here it logs
// them; a deployment publishes them to its broker for the downstream consumers (fulfilment,
// invoicing, ...), which apply each one once with consumeOnce.
import { createOutboxRelay, type OutboxMessage } from "@shardkit/prisma";
import { buildApp } from "./app.js";
import { createAuth, MIN_SECRET_LENGTH } from "./auth.js";
import { OrderService } from "./order-service.js";
import { openShards } from "./shards.js";

// Every route but /health takes a credential signed with this secret (see auth.ts and the README).
const secret = process.env.ORDERS_AUTH_SECRET ?? "";
if (secret.length < MIN_SECRET_LENGTH) {
  throw new Error(
    `orders service: bad environment:\n  - ORDERS_AUTH_SECRET: required, at least ${MIN_SECRET_LENGTH} characters (the secret credentials are signed with)`,
  );
}
const shards = await openShards({ shardsJson: process.env.SHARDKIT_SHARDS });
const service = new OrderService(shards);
const app = buildApp(service, { auth: createAuth(secret), logger: true });
const publish = async (message: OutboxMessage) => {
  app.log.info({ event: message.topic, id: message.id, aggregateId: message.aggregateId }, "outbox event");
};
const relay = createOutboxRelay({
  registry: shards.registry,
  pollIntervalMs: 200,
  deliver: publish,
  onError: (error, database, shards) =>
    console.error(`relay: ${database} (shards ${shards || "none"}) unavailable: ${(error as Error).message}`),
});
relay.start();
const port = Number(process.env.PORT ?? 3000);
if (!(Number.isInteger(port) && port >= 0 && port <= 65_535)) {
  throw new Error(`orders service: PORT must be a port number (0 picks a free one), got ${process.env.PORT}`);
}
const address = await app.listen({ port, host: "127.0.0.1" });
console.error(`orders service on ${address} (${shards.describe})`);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, async () => {
    await app.close();
    await relay.stop();
    await shards.close();
    process.exit(0);
  });
}
