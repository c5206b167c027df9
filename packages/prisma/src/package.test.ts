import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { checkPublishedPackage } from "@shardkit/vitest-config/quality";
import { describe, expect, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

describe("published package", () => {
  it("passes publint and are-the-types-wrong, and imports from ESM and CommonJS in a fresh project", () => {
    const report = checkPublishedPackage(pkgDir, {
      alsoPack: ["../../id", "../../scatter"].map((dir) => fileURLToPath(new URL(dir, import.meta.url))),
      scripts: {
        // Both entries share one copy of each class (shared chunks), from import and from require.
        sharedClasses: `
          import { createRequire } from "node:module";
          import { RegistryConfigError, SchemaRolloutError as Main } from "@shardkit/prisma";
          import { openShards, SchemaRolloutError as Sub } from "@shardkit/prisma/rollout";
          const require = createRequire(process.cwd() + "/");
          const same = require("@shardkit/prisma").SchemaRolloutError === require("@shardkit/prisma/rollout").SchemaRolloutError;
          const thrown = await openShards({ schema: "x", createClient: () => ({}) }).catch((e) => e);
          console.log(Main === Sub, same, thrown instanceof RegistryConfigError);`,
        // The entry shardkit's own packages use, from import and from require.
        internal: `
          import { createRequire } from "node:module";
          import * as internal from "@shardkit/prisma/internal";
          const require = createRequire(process.cwd() + "/");
          console.log(Object.keys(internal).sort().join(","), Object.keys(require("@shardkit/prisma/internal")).sort().join(","));`,
      },
    });
    expect(report.scripts.sharedClasses).toBe("true true true");
    const internal = "LOCKS,SHARDKIT_TABLES,databaseIdentities,shardBitsSql,withDeadline";
    expect(report.scripts.internal).toBe(`${internal} ${internal}`);
    // The HTTP entry for Fastify services (fastify itself is an optional peer, for its types).
    const http = [
      "IdempotencyKeyRequiredError",
      "InvalidInputError",
      "ServiceError",
      "badTextIn",
      "duplicateKey",
      "httpAnswerOf",
      "idempotencyKeyOf",
      "parseInput",
      "replyOutcome",
      "serviceErrors",
      "shardkitHttp",
    ];
    expect(report.entries["@shardkit/prisma/fastify"]).toEqual({ esm: http, cjs: http });
    expect(report.name).toBe("@shardkit/prisma");
    expect(report.publint).not.toMatch(/warning|error|suggestion/i);
    expect(report.attw.ok, report.attw.output).toBe(true);
    const api = [
      "ActionUnit",
      "CommandUnavailableError",
      "ConnectionBudgetError",
      "CrossShardError",
      "DatabaseTimeoutError",
      "InvalidEventError",
      "MissingModelError",
      "NotCommittedError",
      "PartialCommitError",
      "RegistryConfigError",
      "RolloutOptionsError",
      "RoutingOptionsError",
      "SchemaRolloutError",
      "checkConnectionBudget",
      "checkDistinctDatabases",
      "isShardUnavailable",
      "isTransientTransactionError",
      "isShardkitError",
      "ShardKeyRequiredError",
      "ShardRegistry",
      "ShardRoutingError",
      "ShardTimeoutError",
      "StagedWrite",
      "UnknownShardError",
      "UnsupportedShardOperationError",
      "ScatterError",
      "ScatterRefusedError",
      "IdempotencyConflictError",
      "consumeOnce",
      "createOutboxRelay",
      "createShardRegistry",
      "emitEvent",
      "idempotent",
      "shardRegistryFromConfig",
      "shardRegistryFromEnv",
      "shardRouting",
      "shardHealth",
      "decodeJson",
      "encodeJson",
      "withShardDeadline",
      "byColumn",
      "byDirectory",
      "byHash",
      "DirectoryUnavailableError",
      "NotInDirectoryError",
      "UniqueViolationError",
    ].sort();
    expect(report.esm).toEqual(api);
    expect(report.cjs).toEqual(api);
  }, 300_000);

  it("the README example is examples/quickstart.ts verbatim, and it runs on embedded PGlite shards", () => {
    const example = readFileSync(`${pkgDir}/examples/quickstart.ts`, "utf8");
    expect(readFileSync(`${pkgDir}/README.md`, "utf8")).toContain(example);
    const output = execFileSync("pnpm", ["exec", "tsx", "examples/quickstart.ts"], {
      cwd: pkgDir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    expect(output.trim().split("\n")).toEqual([
      "eu database: Ana (1 wallet)",
      "mx database: Luis (1 wallet)",
      "Ana's balance: 70n",
      "CROSS_SHARD: Action writes to shards 0/1, 1/0",
    ]);
  }, 120_000);
});
