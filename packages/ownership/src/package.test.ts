import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { expect } from "vitest";

describePublishedPackage(fileURLToPath(new URL("..", import.meta.url)), {
  // The example runs on embedded PGlite.
  readme: {
    "examples/transfer.ts": (lines) => expect(lines).toEqual(TRANSFER_OUTPUT),
    // Its output stands in the README under it.
    "examples/balance.ts": (lines, readme) => {
      expect(lines[0]).toMatch(/^move 1\/0 eu-1 -> eu-2: /);
      expect(lines.at(-1)).toMatch(/^no-move: max\/mean 2\.59 -> 1\.23/);
      expect(readme).toContain(`It prints:\n\n\`\`\`\n${lines.join("\n")}\n\`\`\``);
    },
  },
});

const TRANSFER_OUTPUT = [
  'precheck of a move to "new": ok',
  "a second mover: MOVE_IN_PROGRESS",
  "a script writing to the old owner: fenced",
  'shard 0/1 is owned by "new" at epoch 2',
  'stale router\'s write: remaining 0 on "new", 1 refusal, 1 retry',
  'owner "new" at epoch 2; records: old moved, new owned',
];
