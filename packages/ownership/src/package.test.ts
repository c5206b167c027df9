import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { expect } from "vitest";

describePublishedPackage(fileURLToPath(new URL("..", import.meta.url)), {
  // The example runs on embedded PGlite.
  readme: { "examples/transfer.ts": (lines) => expect(lines).toEqual(TRANSFER_OUTPUT) },
});

const TRANSFER_OUTPUT = [
  'precheck of a move to "new": ok',
  "a second mover: MOVE_IN_PROGRESS",
  "a script writing to the old owner: fenced",
  'shard 0/1 is owned by "new" at epoch 2',
  'stale router\'s write: remaining 0 on "new", 1 refusal, 1 retry',
  'owner "new" at epoch 2; records: old moved, new owned',
];
