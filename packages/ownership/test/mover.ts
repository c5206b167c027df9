// A mover process for the crash tests: moves shard 0/1 from a to e (live) and SIGKILLs itself
// right after the step named by STOP_AFTER, as a crash there would.
import { moveShard, PartitionMap } from "../src/index.js";
import { routerOver, S, TABLES } from "./layout.js";

const urls = JSON.parse(process.env.MOVE_URLS!) as { a: string; b: string; e: string };
const { registry, physical } = routerOver(urls);
const map = await PartitionMap.open({ registry, tables: TABLES });
await moveShard({
  map,
  shard: S.g0m1,
  to: physical.e,
  sourceConnection: urls.a,
  onProgress: () => {},
  afterStep: (step) => {
    if (step === process.env.STOP_AFTER) process.kill(process.pid, "SIGKILL");
  },
});
process.stdout.write("finished without stopping\n");
process.exit(0);
