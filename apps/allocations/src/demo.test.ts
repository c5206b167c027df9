import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

describe("pnpm demo", () => {
  it("two desks sell out B-173 while its shard moves: every unit confirmed once, the stale desk refused and retried", () => {
    const output = execFileSync("pnpm", ["exec", "tsx", "src/demo.ts"], {
      cwd: new URL("..", import.meta.url).pathname,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    expect(output).toContain("bucket B-173 (200 units) on shard 0/1, in db-a");
    expect(output).toMatch(
      /moved shard 0\/1 from db-a to db-new \(epoch 2\) while the desks confirmed: writes held \d+ ms/,
    );
    expect(output).toContain("confirmations: 200 answered, 200 recorded in db-new (capacity 200)");
    expect(output).toContain("double decisions: 0");
    expect(output).toMatch(/desk two: [1-9]\d* stale-route rejections/);
    expect(output).toContain("retrying desk one's first key: HTTP 201, the recorded confirmation");
  }, 120_000);
});
