// One allocation desk: its own router process, confirming units of a bucket with its own
// idempotency key. It opens its partition map, prints "ready", confirms when it reads "go" on
// stdin, prints its outcome as JSON, and exits when stdin closes.
import { createInterface } from "node:readline";
import { confirm } from "./confirm.js";
import { routerOver } from "./layout.js";

const urls = JSON.parse(process.env.OWNERSHIP_URLS!) as { a: string; b: string; e: string };
const { registry, db, open } = routerOver(urls);
// The map is read once here; a desk never polls, so it learns of a move only when refused.
const map = await open();
const desk = process.env.DESK!;
const bucketId = process.env.BUCKET!;
const lines = createInterface({ input: process.stdin });
process.stdout.write("ready\n");
for await (const line of lines) {
  if (line !== "go") continue;
  // A failure is an answer too (printed, not a crash), so the test sees it instead of waiting.
  const outcome = await confirm(db, { bucketId, desk, key: process.env.KEY! }).catch((error: unknown) => ({
    desk,
    outcome: "failed" as const,
    error: String(error).slice(0, 500),
  }));
  process.stdout.write(
    `${JSON.stringify({ ...outcome, landedOn: registry.databaseOf(bucketId).name, counters: map.counters })}\n`,
  );
}
await registry.disconnect();
