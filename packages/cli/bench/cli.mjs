// `pnpm --filter @shardkit/cli bench`: what running the binary costs, as ratios against baselines
// measured in the same run (PostgreSQL on loopback; each figure the median of the runs).
//   1. start-up: `shardkit --version` against `node -e 0`;
//   2. `status` and `doctor` over 4 databases against `--version` (the start-up alone);
//   3. `analyze` of 1,000,000 sampled operations against the same scorecard computed in-process
//      over the same lines (JSON.parse + analyzeShardKey), so the ratio is the binary's overhead.
import { execFileSync, spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { analyzeShardKey } from "@shardkit/selector";
import { createDatabase, dropDatabase, MAIN_PORT } from "@shardkit/test-db";

const bin = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
const schema = fileURLToPath(new URL("../test/schema.prisma", import.meta.url));
const RUNS = 7;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const wall = (args) => {
  const started = performance.now();
  const r = spawnSync(process.execPath, args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${args.join(" ")}: exit ${r.status}\n${r.stderr}`);
  return performance.now() - started;
};

const names = [0, 1, 2, 3].map((i) => `sk_cli_bench_${i}_${process.pid}`);
const urls = [];
for (const name of names) urls.push(await createDatabase(MAIN_PORT, name));
const config = join(tmpdir(), `shardkit-bench-${process.pid}.json`);
writeFileSync(
  config,
  JSON.stringify(urls.flatMap((url, i) => [0, 1].map((m) => ({ group: i, member: m, url })))),
);
const sample = join(tmpdir(), `shardkit-bench-${process.pid}.jsonl`);
try {
  execFileSync(process.execPath, [bin, "rollout", "-c", config, "--schema", schema, "--no-progress"]);
  const times = { node: [], version: [], status: [], doctor: [] };
  for (let i = 0; i < RUNS; i++) {
    // Alternating, so drift of a noisy machine falls on every variant alike.
    times.node.push(wall(["-e", "0"]));
    times.version.push(wall([bin, "--version"]));
    times.status.push(wall([bin, "status", "-c", config]));
    times.doctor.push(wall([bin, "doctor", "-c", config]));
  }
  const m = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]));

  // 1,000,000 operations: 100,000 tenants of skewed popularity, 10% touching a second tenant, 1% keyless.
  const lines = [];
  let seed = 42;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let i = 0; i < 1_000_000; i++) {
    const t = Math.floor(100_000 * rand() ** 3);
    const tenants = rand() < 0.1 ? [`t${t}`, `t${Math.floor(100_000 * rand())}`] : [`t${t}`];
    lines.push(
      JSON.stringify({
        tenants: rand() < 0.01 ? null : tenants,
        op: rand() < 0.3 ? "write" : "read",
        cost: 1 + (i % 7),
      }),
    );
  }
  writeFileSync(sample, `${lines.join("\n")}\n`);
  const analyzeCli = [];
  const analyzeIn = [];
  for (let i = 0; i < 3; i++) {
    analyzeCli.push(wall([bin, "analyze", sample, "--key", "tenants", "--members", "64"]));
    const started = performance.now();
    const ops = lines.map((l) => JSON.parse(l));
    analyzeShardKey(
      ops.map((o) => ({ key: o.tenants?.[0] ?? null, touches: o.tenants?.slice(1), op: o.op, cost: o.cost })),
      { members: 64 },
    );
    analyzeIn.push(performance.now() - started);
  }
  const ms = (x) => `${Math.round(x)} ms`;
  console.log(`| run | median wall time | ratio |`);
  console.log(`|---|---|---|`);
  console.log(`| \`node -e 0\` (baseline) | ${ms(m.node)} | 1.00 |`);
  console.log(`| \`shardkit --version\` | ${ms(m.version)} | ${(m.version / m.node).toFixed(2)}x node |`);
  console.log(
    `| \`shardkit status\`, 4 databases, 8 shards | ${ms(m.status)} | ${(m.status / m.version).toFixed(2)}x --version |`,
  );
  console.log(
    `| \`shardkit doctor\`, 4 databases | ${ms(m.doctor)} | ${(m.doctor / m.version).toFixed(2)}x --version |`,
  );
  console.log(
    `| \`shardkit analyze\`, 1,000,000 lines, 64 members | ${ms(median(analyzeCli))} | ${(median(analyzeCli) / median(analyzeIn)).toFixed(2)}x in-process (${ms(median(analyzeIn))}) |`,
  );
} finally {
  for (const name of names) await dropDatabase(MAIN_PORT, name);
  rmSync(config, { force: true });
  rmSync(sample, { force: true });
}
