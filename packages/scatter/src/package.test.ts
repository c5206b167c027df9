import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { expect } from "vitest";

describePublishedPackage(fileURLToPath(new URL("..", import.meta.url)), {
  readme: {
    "examples/pages.mjs": (lines) =>
      expect(lines).toEqual([
        "complete: false, missing: ap (error: connect ECONNREFUSED 127.0.0.1:5433)",
        "partial page: eu-2=300 us-1=300 eu-0=120 us-0=99",
        'ScatterFailedError TARGETS_FAILED: 1 of 3 targets missing: "ap" (error: connect ECONNREFUSED 127.0.0.1:5433)',
        "page: eu-2=300 us-1=300 ap-0=250 eu-0=120  (fetched eu:4 us:3 ap:2)",
        expect.stringMatching(/^next cursor: [A-Za-z0-9_-]+$/),
        "page: us-0=99 ap-1=75 eu-1=75 eu-3=42  (fetched eu:2 us:2 ap:1)",
        expect.stringMatching(/^next cursor: [A-Za-z0-9_-]+$/),
        "page: us-2=15  (fetched eu:0 us:1 ap:0)",
      ]),
  },
});
