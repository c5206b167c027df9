// One service instance starting: its own router process. It connects to every database, prints
// "ready", opens its partition map when it reads "go" on stdin, and prints the map it opened with
// (or the error it failed with) as JSON.
import { createInterface } from "node:readline";
import { PartitionMap } from "../src/index.js";
import { routerOver, TABLES } from "./layout.js";

const urls = JSON.parse(process.env.OWNERSHIP_URLS!) as { a: string; b: string; e: string };
const { registry } = routerOver(urls);
// Connected before "go", so the opens that follow start together.
await Promise.all(registry.databases.map((p) => p.client.$queryRawUnsafe("SELECT 1")));
process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) {
  if (line !== "go") continue;
  const outcome = await PartitionMap.open({ registry, tables: TABLES }).then(
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
  process.stdout.write(`${JSON.stringify(outcome)}\n`);
  break;
}
await registry.disconnect();
