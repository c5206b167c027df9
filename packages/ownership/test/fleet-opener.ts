// One router of a fleet starting: its own process, with a client of its own per database (a pool of
// FLEET_POOL connections). It prints "ready" once its clients are made (none connected yet), opens
// its partition map over every database when it reads "go" on stdin, and prints what happened as
// JSON: opened or the error, the time the open took, and what its open installed and recorded.
import { createInterface } from "node:readline";
import { PartitionMap } from "../src/index.js";
import { fleetRegistry } from "./fleet.js";
import { TABLES } from "./layout.js";

const urls = JSON.parse(process.env.FLEET_URLS!) as string[];
const perDatabase = Number(process.env.FLEET_SHARDS_PER_DATABASE ?? 4);
const pool = Number(process.env.FLEET_POOL ?? 2);
const timeoutMs = Number(process.env.FLEET_TIMEOUT_MS ?? 5000);
const registry = fleetRegistry(urls, perDatabase, pool);
process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) {
  if (line !== "go") continue;
  const installs: string[] = [];
  const started = performance.now();
  const cpu = process.cpuUsage();
  const outcome = await PartitionMap.open({
    registry,
    tables: TABLES,
    timeoutMs,
    onSignal: (s) => {
      if (s.type === "install") installs.push(`${s.database}:${s.what}`);
    },
  }).then(
    (map) => {
      map.close();
      return { ok: true, unanswered: map.unanswered().size, problems: map.problemsOf().length };
    },
    (error: unknown) => ({ ok: false, error: String(error).slice(0, 300), unanswered: 0, problems: 0 }),
  );
  const ms = Math.round(performance.now() - started);
  const used = process.cpuUsage(cpu);
  const cpuMs = Math.round((used.user + used.system) / 1000);
  process.stdout.write(`${JSON.stringify({ ...outcome, ms, cpuMs, installs })}\n`);
  break;
}
await registry.disconnect();
