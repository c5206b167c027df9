import { copiedSchema } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";

describe("schema", () => {
  it("carries @shardkit/prisma's outbox models unchanged", () => {
    const { ours, upstream } = copiedSchema(new URL("..", import.meta.url), "shardkit.prisma");
    expect(ours).toBe(upstream);
  });
});
