import { readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describeModuleStructure } from "@shardkit/vitest-config/structure";
import { describe, expect, it } from "vitest";

const sourceDir = dirname(fileURLToPath(import.meta.url));

// The two sides of ownership (docs/architecture.md, "The router's side and the mover's side"). A
// router (`PartitionMap` and the read-only `readPartitionMap`) reads the records, refreshes, is
// refused by fences and repairs what a stopped mover left; a mover (`moveShard`, a balance run, a
// person with a `ShardLease`) changes owners under its lease. The router imports nothing of the
// mover: a router never loads the code that moves a shard, and the mover's leases, steps and
// replication change without touching it.
const ROUTER = [
  "map.ts", // the map: read, refresh, the hook routing calls
  "router-view.ts", // its view of the records, applied to the registry
  "router-wait.ts", // calls to a shard between owners
  "heal.ts", // the repairs a router makes itself (a fence given back, a decided switch completed)
  "install.ts", // installing a map in its databases
  "announce.ts", // telling other routers of a change
  "changes.ts", // every change of records (one transaction under the change lock)
  "refusal.ts", // what a database's refusal says
  "signals.ts", // counters and signals
  "view.ts", // readPartitionMap
  "owners.ts", // who owns each shard by the records (resolveOwners; read by both)
  "records.ts", // what the databases record of a move (read by routers to give a fence back)
];
const MOVER = [
  "move*.ts", // moveShard, its deadlines, undoing or finishing a stopped move
  "lease*.ts", // a move's lease and its steps
  "steps.ts", // a move as a table of steps
  "verify.ts", // checking the copy
  "replication.ts", // a live move's logical replication
  "journal.ts", // the moves' journal
  "check.ts", // the move precheck (checkMove)
  "live-issues.ts", // what the precheck asks of a server for a live move
  "pooler.ts", // whether a URL reaches a transaction-mode pooler (the precheck of a live move)
  "balance/", // the balancer: plans and runs moves
];
/** Foundations either side uses; they import neither. */
const SHARED = ["errors.ts", "raw.ts", "sql.ts", "tables.ts", "sizes.ts"];

describeModuleStructure({
  sourceDir,
  packageName: "@shardkit/ownership",
  apart: [
    {
      name: "the router's side",
      modules: ROUTER,
      mustNotReach: { name: "the mover's side", modules: MOVER },
    },
    {
      name: "the shared foundations",
      modules: SHARED,
      mustNotReach: { name: "either side", modules: [...ROUTER, ...MOVER] },
    },
  ],
});

describe("the sides of ownership", () => {
  it("place every source module on one side (index.ts, the entry, imports both)", () => {
    const sources = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory()
          ? sources(join(dir, e.name))
          : /\.ts$/.test(e.name) && !/\.test(-d)?\.ts$/.test(e.name)
            ? [relative(sourceDir, join(dir, e.name))]
            : [],
      );
    const sideOf = (file: string) =>
      [ROUTER, MOVER, SHARED].filter((side) =>
        side.some((p) =>
          p.endsWith("/")
            ? file.startsWith(p)
            : new RegExp(`^${p.replace(".", "\\.").replace("*", "[^/]*")}$`).test(file),
        ),
      ).length;
    const unplaced = sources(sourceDir).filter((f) => f !== "index.ts" && sideOf(f) !== 1);
    expect(unplaced).toEqual([]);
  });
});
