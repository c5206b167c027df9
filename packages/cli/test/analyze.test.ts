import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { analyzeShardKey } from "@shardkit/selector";
import { beforeAll, describe, expect, it } from "vitest";
import { scratch, shardkit } from "./cli.js";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const sample = join(scratch, "traffic.jsonl");
const README_COMMAND =
  "shardkit analyze traffic.jsonl --key tenant --key accounts --key region --members 8 --entity accounts.0";

beforeAll(() => {
  writeFileSync(
    sample,
    execFileSync("node", ["examples/traffic.mjs"], { cwd: pkgDir, maxBuffer: 64 * 1024 * 1024 }),
  );
});

describe("shardkit analyze", () => {
  it("prints the candidates side by side: the README's example, verbatim", async () => {
    const readme = readFileSync(join(pkgDir, "README.md"), "utf8");
    const block = readme.match(
      new RegExp(`\\$ ${README_COMMAND.replaceAll(".", "\\.")}\\n([\\s\\S]*?)\`\`\``),
    )?.[1];
    expect(block, "the README shows the command and its output").toBeDefined();
    const run = await shardkit(
      README_COMMAND.split(" ")
        .slice(1)
        .map((a) => (a === "traffic.jsonl" ? sample : a)),
    );
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe(block);
  });

  it("--json carries @shardkit/selector's scorecard of each candidate, and key stability", async () => {
    const run = await shardkit([
      "analyze",
      sample,
      "-k",
      "tenant",
      "-k",
      "acct=accounts",
      "-m",
      "0,3,9",
      "--json",
      "--entity",
      "accounts.0",
    ]);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report.operations).toBe(20_000);
    expect(report.members).toEqual([0, 3, 9]);
    expect(report.candidates.map((c: { key: string; path: string }) => [c.key, c.path])).toEqual([
      ["tenant", "tenant"],
      ["acct", "accounts"],
    ]);
    // The same samples through analyzeShardKey in this process give the same scorecard.
    const ops = readFileSync(sample, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const expected = analyzeShardKey(
      ops.map((o) => ({ key: o.accounts[0], touches: o.accounts.slice(1), cost: o.cost, op: o.op })),
      { members: [0, 3, 9] },
    );
    expect(report.candidates[1].scorecard).toEqual(JSON.parse(JSON.stringify(expected)));
    expect(report.candidates[0].stability).toEqual({ entities: 15_892, changed: 0, stableShare: 1 });
  });

  it("reads stdin; measures key stability only with --entity", async () => {
    const lines = [
      { id: "w1", region: "eu", op: "write" },
      { id: "w1", region: "us", op: "write" },
      { id: "w2", region: "eu" },
      { id: "w3" },
    ];
    const input = lines.map((l) => JSON.stringify(l)).join("\n");
    const run = await shardkit(
      ["analyze", "-", "--key", "region", "--members", "2", "--entity", "id", "--json"],
      { input },
    );
    expect(run.code).toBe(0);
    const [candidate] = JSON.parse(run.stdout).candidates;
    expect(candidate.stability).toEqual({ entities: 2, changed: 1, stableShare: 0.5 });
    expect(candidate.scorecard.locality.keyless).toBe(1);
    const without = await shardkit(["analyze", "-", "--key", "region", "--members", "2"], { input });
    expect(without.stdout).toMatch(/^key stability\s+n\/a \(--entity\)$/m);
  });

  it("input and usage errors exit 2, naming the line", async () => {
    const bad = join(scratch, "bad.jsonl");
    writeFileSync(bad, '{"tenant":"a"}\n\n{"tenant": oops}\n');
    const badOp = join(scratch, "badop.jsonl");
    writeFileSync(badOp, '{"tenant":"a","op":"delete"}\n');
    const runs = await Promise.all([
      shardkit(["analyze", bad, "--key", "tenant", "--members", "4"]),
      shardkit(["analyze", badOp, "--key", "tenant", "--members", "4", "--json"]),
      shardkit(["analyze", sample, "--key", "tenant"]),
      shardkit(["analyze", sample, "--key", "tenant", "--members", "0"]),
      shardkit(["analyze", "/nonexistent.jsonl", "--key", "tenant", "--members", "4"]),
    ]);
    for (const run of runs) expect(run.code, run.stderr).toBe(2);
    expect(runs[0]!.stderr).toMatch(/^shardkit analyze: line 3: not JSON/);
    expect(JSON.parse(runs[1]!.stdout)).toMatchObject({
      ok: false,
      error: { code: "INVALID_SAMPLE_FILE", message: 'line 1: op must be "read" or "write", got "delete"' },
    });
    expect(runs[2]!.stderr).toContain("required option '-m, --members <n|list>' not specified");
    expect(runs[3]!.stderr).toContain("--members: expected a count 1..64");
    expect(runs[4]!.stderr).toContain("cannot read the sample file /nonexistent.jsonl");
  });
});
