// The tests run the built binary (dist/cli.js), as a user does. `pnpm test` builds every package
// first; run on its own, this builds the CLI when its build is missing or older than its sources.
// It also makes the package's logical pair of PostgreSQL clusters (test/clusters.ts), shared with
// any other run of these tests on the machine (`shareClusters`): the last run to end drops them, never
// one while another run is using them. A server a test stops or freezes is its file's own instead.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  dropCluster,
  ensureCluster,
  MAIN_PORT,
  patient,
  pgUrl,
  shareClusters,
  undoable,
} from "@shardkit/test-db";
import pg from "pg";
import { LIVE } from "./clusters.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const LOGICAL = [LIVE.source, LIVE.target];

function newest(dir: string): number {
  return Math.max(
    0,
    ...readdirSync(dir).map((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? newest(path) : statSync(path).mtimeMs;
    }),
  );
}

/**
 * The machine's server: started if down. On a loaded machine it can take longer than
 * `ensureCluster`'s one-second look to answer, and starting it again then fails ("already running"):
 * a server that answers within 20 s (scaled by the machine's load) is up.
 */
async function mainServer(): Promise<void> {
  try {
    await ensureCluster("main", MAIN_PORT);
  } catch (error) {
    const client = new pg.Client({
      connectionString: pgUrl(MAIN_PORT, "postgres"),
      connectionTimeoutMillis: patient(20_000),
    });
    await client.connect().catch(() => {
      throw error;
    });
    await client.end();
  }
}

/** The clusters, while the CLI builds; a setup that fails part-way releases them (`undoable`). */
export default function setup() {
  return undoable(async (step) => {
    const clusters = Promise.all([
      mainServer(),
      step(
        shareClusters("cli", {
          clusters: LOGICAL.map((c) => c.cluster),
          make: async () => {
            await Promise.all(LOGICAL.map((c) => ensureCluster(c.cluster, c.port, { logical: true })));
          },
          drop: async () => {
            await Promise.all(LOGICAL.map((c) => dropCluster(c.cluster)));
          },
        }),
        (release) => release(),
      ),
    ]);
    const bin = join(root, "dist/cli.js");
    if (!existsSync(join(root, "src/generated/prisma/client.ts")))
      execFileSync("pnpm", ["run", "--silent", "generate"], { cwd: root, stdio: "inherit" });
    if (!existsSync(bin) || statSync(bin).mtimeMs < newest(join(root, "src")))
      execFileSync("pnpm", ["run", "--silent", "build"], {
        cwd: root,
        stdio: ["ignore", "ignore", "inherit"],
      });
    await clusters;
  });
}
