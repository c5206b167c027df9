// Stopped moves for takeover tests: a balance process (test/balancer.ts, live moves) that kills
// itself with SIGKILL in the middle of its first move, and the load that makes it move.
import { spawn } from "node:child_process";
import { LatencySketch } from "@shardkit/prisma";
import { CREATE_LOAD_TABLE, FLUSH_LOAD } from "@shardkit/prisma/internal";
import { patient } from "@shardkit/test-db";
import { afterEach } from "vitest";
import type { PrismaClient } from "./generated/prisma/client.js";
import { S } from "./layout.js";

/** A test file's helpers over the move databases `urls`; balancers it starts are killed after each test. */
export function stoppedMoves(urls: { a: string; b: string; e: string }) {
  const killed: (() => void)[] = [];
  afterEach(() => {
    for (const kill of killed.splice(0)) kill();
  });
  // The balancers' leases (each move's and the fleet's): short, so the tests need not wait long for
  // a dead one to lapse, but scaled by the machine's load, so a live one busy on a loaded machine
  // renews in time.
  const LEASE_MS = patient(1500);

  /**
   * One router's 10 s window on a, ending `agoMs` before now: 3 s of database time per shard. A
   * check of the last minute (the p99 guard) must record it right before it reads.
   */
  async function recordLoad(client: PrismaClient, agoMs = 50_000) {
    for (const statement of CREATE_LOAD_TABLE) await client.$executeRawUnsafe(statement);
    const sketch = new LatencySketch();
    sketch.record(2, 1500);
    const rows = [S.g0m0, S.g0m1, S.g1m0].map((shard) => ({
      shard: shard.bits,
      window_start: new Date(Date.now() - agoMs - 10_000).toISOString(),
      window_ms: 10_000,
      router: "test:1:r1",
      calls: 1500,
      writes: 1500,
      rows_written: 1500,
      db_ms: 3000,
      sketch: sketch.toJSON(),
      top: [],
      config: "cfg",
    }));
    await client.$executeRawUnsafe(
      FLUSH_LOAD,
      JSON.stringify(rows),
      new Date(Date.now() - 86_400_000).toISOString(),
    );
  }

  /** A balance process killed (by itself) when its first move reaches `step`. */
  function killedBalancer(step: string): Promise<NodeJS.Signals | null> {
    const child = spawn(process.execPath, ["--import", "tsx", "test/balancer.ts"], {
      cwd: new URL("..", import.meta.url).pathname,
      env: {
        ...process.env,
        MOVE_URLS: JSON.stringify(urls),
        KILL_AT: step,
        LEASE_MS: String(LEASE_MS),
      },
      stdio: ["ignore", "inherit", "inherit"],
    });
    killed.push(() => child.kill("SIGKILL"));
    return new Promise((resolve) => child.on("exit", (_code, signal) => resolve(signal)));
  }
  return { recordLoad, killedBalancer, LEASE_MS };
}
