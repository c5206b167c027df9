// One service instance starting: its own router process. It connects to every database, prints
// "ready", opens its partition map when it reads "go" on stdin, and prints the map it opened with
// (or the error it failed with) as JSON, and closes its connections. "again" starts it over, as a
// restart of the instance would: a new registry (new clients, new connections), connected, "ready",
// and the next "go" opens a map anew. It ends when stdin ends.
import { createInterface } from "node:readline";
import { routerOver } from "./layout.js";

const urls = JSON.parse(process.env.OWNERSHIP_URLS!) as { a: string; b: string; e: string };

/** A new router over the databases, connected before "go", so the opens that follow start together. */
async function connected() {
  const router = routerOver(urls);
  await Promise.all(router.registry.databases.map((p) => p.client.$queryRawUnsafe("SELECT 1")));
  process.stdout.write("ready\n");
  return router;
}

let router: Awaited<ReturnType<typeof connected>> | undefined = await connected();
for await (const line of createInterface({ input: process.stdin })) {
  if (line === "again" && !router) router = await connected();
  if (line !== "go" || !router) continue;
  const outcome = await router.open().then(
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
  await router.registry.disconnect();
  router = undefined;
  process.stdout.write(`${JSON.stringify(outcome)}\n`);
}
await router?.registry.disconnect();
