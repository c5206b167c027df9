import { copiedSchema } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";

describe("schema", () => {
  it.each([
    ["outbox models", "shardkit.prisma"],
    ["AtomicDecision model (atomic transfers)", "atomic.prisma"],
  ])("carries @shardkit/prisma's %s unchanged", (_models, file) => {
    const { ours, upstream } = copiedSchema(new URL("..", import.meta.url), file);
    expect(ours).toBe(upstream);
  });
});
