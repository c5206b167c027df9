import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { describe, expect, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

describePublishedPackage(pkgDir, {
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
  },
  check: (report) => expect(report.scripts.sharedClasses).toBe("true true true"),
});

describe("README", () => {
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
