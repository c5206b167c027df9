// What the services' demos (their `demo` script) share: a line at a time on stdout, and the shards
// they run on: the PostgreSQL databases of SHARDKIT_SHARDS, or embedded ones made afresh.
import { rmSync } from "node:fs";
import { join } from "node:path";

/** Writes `line` and a newline to stdout. */
export const say = (line = ""): void => {
  process.stdout.write(`${line}\n`);
};

/** What a service's `openShards` takes from a demo. */
export interface DemoShardsOptions {
  shardsJson: string | undefined;
  dataDir: string;
  log: (line: string) => void;
}

/**
 * The demo's shards, opened with the service's `open`: the databases of SHARDKIT_SHARDS, else
 * embedded ones under .data/demo, emptied first so every run starts from nothing. Progress lines
 * (schema rollout, databases not ready yet) are said indented.
 */
export function openDemoShards<S>(open: (options: DemoShardsOptions) => Promise<S>): Promise<S> {
  const dataDir = join(process.cwd(), ".data", "demo");
  if (!process.env.SHARDKIT_SHARDS) rmSync(dataDir, { recursive: true, force: true });
  return open({ shardsJson: process.env.SHARDKIT_SHARDS, dataDir, log: (l) => say(`  ${l}`) });
}
