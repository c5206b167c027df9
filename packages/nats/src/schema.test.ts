import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/** A schema's model blocks, comments left out (their wording may change; the models may not). */
const models = (schema: string) =>
  schema
    .split("\n")
    .map((line) => line.replace(/\/\/.*$/, "").trimEnd())
    .join("\n")
    .match(/^model \w+ \{[^}]*\}/gm) ?? [];

describe("the example's schema", () => {
  it("holds the models of @shardkit/prisma's schema/shardkit.prisma as they are", () => {
    const ours = models(readFileSync(new URL("../examples/schema.prisma", import.meta.url), "utf8"));
    const theirs = models(
      readFileSync(new URL("../../prisma/schema/shardkit.prisma", import.meta.url), "utf8"),
    );
    expect(theirs.length).toBeGreaterThanOrEqual(3);
    for (const model of theirs) expect(ours).toContain(model);
  });
});
