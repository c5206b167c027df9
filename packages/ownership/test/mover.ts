// A mover process, as `shardkit move` is one: moves shard 0/1 from a to e (live). For the crash
// tests it SIGKILLs itself right after the step named by STOP_AFTER, as a crash there would;
// without STOP_AFTER (the bench) it says "ready", starts the move when a line arrives on stdin
// (so its start-up is not part of what the bench measures) and prints the move's result as JSON.
import { moveShard, PartitionMap } from "../src/index.js";
import { routerOver, S, TABLES } from "./layout.js";

const urls = JSON.parse(process.env.MOVE_URLS!) as { a: string; b: string; e: string };
const { registry, physical } = routerOver(urls);
const map = await PartitionMap.open({ registry, tables: TABLES });
if (!process.env.STOP_AFTER) {
  process.stdout.write("ready\n");
  await new Promise((resolve) => process.stdin.once("data", resolve));
}
const result = await moveShard({
  map,
  shard: S.g0m1,
  to: physical.e,
  sourceConnection: urls.a,
  onProgress: () => {},
  afterStep: (step) => {
    if (step === process.env.STOP_AFTER) process.kill(process.pid, "SIGKILL");
  },
});
process.stdout.write(process.env.STOP_AFTER ? "finished without stopping\n" : `${JSON.stringify(result)}\n`);
process.exit(0);
