import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { expect } from "vitest";

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
  readme: {
    // It runs on embedded PGlite shards.
    "examples/quickstart.ts": (lines) =>
      expect(lines).toEqual([
        "eu database: Ana (1 wallet)",
        "mx database: Luis (1 wallet)",
        "Ana's balance: 70n",
        "CROSS_SHARD: Action writes to shards 0/1, 1/0",
      ]),
  },
});
