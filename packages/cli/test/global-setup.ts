// The tests run the built binary (dist/cli.js), as a user does. `pnpm test` builds every package
// first; run on its own, this builds the CLI when its build is missing or older than its sources.
// It also makes the package's own PostgreSQL clusters (test/clusters.ts), all at once, and drops
// them at the end.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { dropCluster, ensureCluster, MAIN_PORT, pgUrl } from "@shardkit/test-db";
import pg from "pg";
import { DASH, DOWN, FLEET, LIVE } from "./clusters.js";

const root = fileURLToPath(new URL("..", import.meta.url));

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
 * a server that answers within 20 s is up.
 */
async function mainServer(): Promise<void> {
  try {
    await ensureCluster("main", MAIN_PORT);
  } catch (error) {
    const client = new pg.Client({
      connectionString: pgUrl(MAIN_PORT, "postgres"),
      connectionTimeoutMillis: 20_000,
    });
    await client.connect().catch(() => {
      throw error;
    });
    await client.end();
  }
}

export default async function setup() {
  const clusters = Promise.all([
    mainServer(),
    ensureCluster(DOWN.cluster, DOWN.port),
    ensureCluster(DASH.cluster, DASH.port),
    ensureCluster(FLEET.cluster, FLEET.port),
    ensureCluster(LIVE.source.cluster, LIVE.source.port, { logical: true }),
    ensureCluster(LIVE.target.cluster, LIVE.target.port, { logical: true }),
  ]);
  const bin = join(root, "dist/cli.js");
  if (!existsSync(join(root, "src/generated/prisma/client.ts")))
    execFileSync("pnpm", ["run", "--silent", "generate"], { cwd: root, stdio: "inherit" });
  if (!existsSync(bin) || statSync(bin).mtimeMs < newest(join(root, "src")))
    execFileSync("pnpm", ["run", "--silent", "build"], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
  await clusters;
  return async () => {
    await Promise.all([DOWN, DASH, FLEET, LIVE.source, LIVE.target].map((c) => dropCluster(c.cluster)));
  };
}
