// Databases for the atomic-action fault tests: x and z on the atomic tests' shared server (as
// atomic-world.ts), y alone on a server of these tests' own (`FAULT_SERVER`), which they stop and
// freeze mid-commit. Shards as LAYOUT: x 0/0 0/1, y 0/2 1/0, z 1/1 1/2. A transfer x -> y is decided
// on x (y a participant); y -> z is decided on y.
import { type ChildProcess, spawn } from "node:child_process";
import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, ownCluster, patient, shareCluster } from "@shardkit/test-db";
import { rolloutSchema } from "../src/rollout.js";
import { ATOMIC_SERVER, useAtomicWorld } from "./atomic-world.js";

/**
 * The server of y, which the tests stop and freeze: the test file's own (`ownCluster`), shared with
 * no other file or run, made with its world (set from then on) and dropped with it.
 */
export const FAULT_SERVER = { cluster: "", port: 0 };

/** Makes the servers (the atomic one when no overlapping run did) and x, y, z with the test schema; their URLs and the release. */
async function faultDatabases(tag: string): Promise<{ urls: string[]; release(): Promise<void> }> {
  const settings = { settings: { max_prepared_transactions: 50 } };
  const own = await ownCluster("skatomicf", settings);
  Object.assign(FAULT_SERVER, { cluster: own.cluster, port: own.port });
  const releases = [await shareCluster(ATOMIC_SERVER.cluster, ATOMIC_SERVER.port, settings), own.drop];
  const placed = [
    { name: `sk_atomicf_${tag}_x_${process.pid}`, port: ATOMIC_SERVER.port },
    { name: `sk_atomicf_${tag}_y_${process.pid}`, port: FAULT_SERVER.port },
    { name: `sk_atomicf_${tag}_z_${process.pid}`, port: ATOMIC_SERVER.port },
  ];
  const urls: string[] = [];
  for (const { name, port } of placed) urls.push(await createDatabase(port, name));
  await rolloutSchema({
    schema: new URL("./schema.prisma", import.meta.url).pathname,
    targets: placed.map(({ name }, i) => ({ name, adapter: new PrismaPg({ connectionString: urls[i]! }) })),
    onProgress: () => {},
  });
  return {
    urls,
    release: async () => {
      for (const { name, port } of placed) await dropDatabase(port, name).catch(() => {});
      for (const release of releases) await release();
    },
  };
}

/**
 * A test file's x, y, z and a router over them whose statements have a deadline (`timeoutMs`,
 * scaled by the machine's load): made before its tests, dropped after; before each test every
 * prepared transaction concluded and every table emptied.
 */
export function useFaultWorld(tag: string) {
  return useAtomicWorld(tag, {
    databases: faultDatabases,
    // Recovery is another process's here (a router of the test's own would conclude on its own too).
    router: () => ({ timeoutMs: faultTimeoutMs(), atomicRecovery: false }),
    resetMs: patient(60_000),
  });
}

/** The deadline of the fault tests' routers: what a database that stopped answering is given. */
export const faultTimeoutMs = () => patient(3_000);

/**
 * Recovery by another process (test/atomic-recover-child.ts): a router of its own over `urls` runs
 * recovery rounds until nothing is prepared; resolves to the outcomes it reported, by global id.
 */
export function recoverInChild(urls: readonly string[]): Promise<Record<string, string>> {
  const child: ChildProcess = spawn("pnpm", ["exec", "tsx", "test/atomic-recover-child.ts"], {
    cwd: new URL("..", import.meta.url).pathname,
    env: { ...process.env, ATOMIC_RECOVER: JSON.stringify({ urls }) },
    stdio: ["ignore", "pipe", "inherit"],
    detached: true,
  });
  let out = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    child.on("exit", (code) => {
      const line = out.split("\n").find((l) => l.startsWith("outcomes "));
      if (code === 0 && line) resolve(JSON.parse(line.slice("outcomes ".length)) as Record<string, string>);
      else reject(new RangeError(`the recovery process exited (${code}): ${out}`));
    });
  });
}
