import { describeErrorRules, type ErrorTable } from "@shardkit/vitest-config/errors";
import { describe, expect, it } from "vitest";
import { decodeCursor } from "./cursor.js";
import * as errors from "./errors.js";
import { mergeSorted } from "./merge-sorted.js";
import { scatter } from "./scatter.js";
import { compareBy, normalizeOrderBy } from "./sort.js";

/** Every code (the Record makes the table exhaustive), its one class, and a public call that raises it. */
const byCode: ErrorTable<errors.ScatterErrorCode> = {
  TARGETS_FAILED: [
    errors.ScatterFailedError,
    () =>
      scatter([1], async () => {
        throw new Error("down");
      }),
  ],
  DEADLINE_EXCEEDED: [
    errors.ScatterDeadlineError,
    () => scatter([1], () => new Promise(() => {}), { deadlineMs: 1 }),
  ],
  ABORTED: [errors.ScatterAbortedError, () => scatter([1], async () => 1, { signal: AbortSignal.abort() })],
  INVALID_CURSOR: [errors.InvalidCursorError, () => decodeCursor("garbage", [{ field: "id" }])],
  INVALID_OPTIONS: [errors.InvalidScatterOptionsError, () => normalizeOrderBy([])],
  UNSORTED_INPUT: [errors.UnsortedInputError, () => mergeSorted([[{ k: 2 }, { k: 1 }]], [{ field: "k" }])],
  UNSORTABLE_VALUE: [errors.UnsortableValueError, () => compareBy([{ field: "v" }])({ v: "1" }, { v: 1 })],
};

describeErrorRules(errors, byCode, import.meta.url);

describe("ScatterError", () => {
  it("keeps missing and cause, and defaults missing to empty", () => {
    const cause = new Error("root");
    const missing = [{ target: "a", key: "a", index: 0, reason: "error" as const, error: cause }];
    const failed = new errors.ScatterFailedError("x", { cause, missing });
    expect(failed.cause).toBe(cause);
    expect(failed.missing).toBe(missing);
    const bad = new errors.InvalidCursorError("bad");
    expect(bad.missing).toEqual([]);
    expect("cause" in bad).toBe(false);
  });
});
