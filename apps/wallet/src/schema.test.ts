import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

describe("schema", () => {
  it("carries @shardkit/prisma's outbox models unchanged", () => {
    const ours = readFileSync(new URL("../prisma/schema/shardkit.prisma", import.meta.url), "utf8");
    const upstream = readFileSync(
      new URL("../node_modules/@shardkit/prisma/schema/shardkit.prisma", import.meta.url),
      "utf8",
    );
    expect(ours).toBe(upstream);
  });

  it("carries @shardkit/prisma's AtomicDecision model unchanged (atomic transfers)", () => {
    const ours = readFileSync(new URL("../prisma/schema/atomic.prisma", import.meta.url), "utf8");
    const upstream = readFileSync(
      new URL("../node_modules/@shardkit/prisma/schema/atomic.prisma", import.meta.url),
      "utf8",
    );
    expect(ours).toBe(upstream);
  });
});
