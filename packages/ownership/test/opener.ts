// One service instance starting: its own router process. It connects to every database, prints
// "ready", opens its partition map when it reads "go" on stdin, and prints the map it opened with
// (or the error it failed with) as JSON, and closes its connections. "again" starts it over, as a
// restart of the instance would: a new registry (new clients, new connections), connected, "ready",
// and the next "go" opens a map anew. It ends when stdin ends.
import { createInterface } from "node:readline";
import { patient } from "@shardkit/test-db";
import { PartitionMap } from "../src/index.js";
import { routerOver, TABLES } from "./layout.js";

const urls = JSON.parse(process.env.OWNERSHIP_URLS!) as { a: string; b: string; e: string };

/** A new router over the databases, connected before "go", so the opens that follow start together. */
async function connected() {
  const { registry } = routerOver(urls);
  await Promise.all(registry.databases.map((p) => p.client.$queryRawUnsafe("SELECT 1")));
  process.stdout.write("ready\n");
  return registry;
}

let registry: Awaited<ReturnType<typeof connected>> | undefined = await connected();
for await (const line of createInterface({ input: process.stdin })) {
  if (line === "again" && !registry) registry = await connected();
  if (line !== "go" || !registry) continue;
  const outcome = await PartitionMap.open({ registry, tables: TABLES, timeoutMs: patient(5000) }).then(
    (map) => {
      const opened = {
        ok: true,
        entries: map.entries().map((e) => ({ ...e, shard: e.shard.key })),
        tables: map.tables,
      };
      map.close();
      return opened;
    },
    (error: unknown) => ({ ok: false, error: String(error).slice(0, 500) }),
  );
  await registry.disconnect();
  registry = undefined;
  process.stdout.write(`${JSON.stringify(outcome)}\n`);
}
await registry?.disconnect();
