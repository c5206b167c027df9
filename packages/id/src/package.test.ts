import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { expect } from "vitest";

describePublishedPackage(fileURLToPath(new URL("..", import.meta.url)), {
  readme: {
    "examples/quickstart.mjs": (lines) => {
      expect(lines).toHaveLength(4);
      expect(lines[0]).toMatch(/^[0-9a-f-]{36} {2}shard 1\/5 \(group 1, member 5\)/);
      expect(lines[1]).toMatch(/shard 1\/5/);
      expect(lines[2]).toMatch(/shard 0\/0/);
      expect(lines[3]).toBe(
        'InvalidShardedIdError (INVALID_SHARDED_ID): Invalid sharded ID "0f8fad5b-d9cb-469f-a165-70867728950e": version is 4, expected 7',
      );
    },
  },
});
