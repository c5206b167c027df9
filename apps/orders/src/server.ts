// Starts the orders service: embedded PGlite shards under ./.data by default, or the PostgreSQL
// shards in SHARDKIT_SHARDS ([{ "group": 0, "member": 0, "url": "postgresql://..." }, ...]).
// A shard database that is down at start does not stop the service: its shards answer 503 until
// it is back. The relay hands every outbox event (order.placed, order.cancelled) to `publish`: here it logs
// them; a deployment publishes them to its broker for the downstream consumers (fulfilment,
// invoicing, ...), which apply each one once with consumeOnce.
import { createOutboxRelay, type OutboxMessage } from "@shardkit/prisma";
import { authSecret, logRelayError, portOf, serve } from "@shardkit/service-kit/serve";
import { buildApp } from "./app.js";
import { createAuth } from "./auth.js";
import { OrderService } from "./order-service.js";
import { openShards } from "./shards.js";

// Every route but /health takes a credential signed with this secret (see auth.ts and the README).
const secret = authSecret("orders", "ORDERS_AUTH_SECRET");
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
  onError: logRelayError,
});
relay.start();
await serve(app, {
  service: "orders",
  port: portOf("orders"),
  describe: shards.describe,
  close: [() => relay.stop(), () => shards.close()],
});
