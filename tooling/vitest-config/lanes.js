#!/usr/bin/env node
// The repository's test run (`pnpm test`): every vitest project, in lanes that run side by side.
// A project's files run one at a time where they share databases (its own config says so); vitest
// alone would then run every such project one after another, leaving a core idle while a test waits
// out a lease or an npm install. Each lane is one `vitest run` over its projects (one file at a time
// on two cores); every project's tests are in exactly one of the two test lanes, and the release
// checks (each package's src/package.test.ts: packing, publint, are-the-types-wrong, type
// resolution) run in a third lane of their own, so they lengthen neither test lane
// (SHARDKIT_TEST_FILES tells each project's config which of its files a lane runs). Lines are
// prefixed with their lane. With SHARDKIT_TEST_REPORT set, the lanes' JSON reports are merged into
// that file. Packages are packed once for the whole run (SHARDKIT_PACK_CACHE). Arguments
// (`pnpm test -- --project @shardkit/id`) run one plain vitest over every file instead.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { RELEASE_CHECKS } from "./index.js";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const vitest = join(repoRoot, "node_modules/.bin/vitest");

/** Balanced by the files' durations (docs/development.md): the move tests beside the template end-to-end test. */
const TEST_LANES = [
  [
    "@shardkit/ownership",
    "@shardkit/cli",
    "@shardkit/nats",
    "@shardkit/id",
    "@shardkit/selector",
    "@shardkit/scatter",
  ],
  ["create-shardkit", "@shardkit/prisma", "@shardkit/wallet", "@shardkit/orders", "@shardkit/allocations"],
];

/** Every vitest project: its name, and whether it has release checks. */
function projects() {
  const found = [];
  for (const parent of ["packages", "apps"]) {
    for (const dir of readdirSync(join(repoRoot, parent))) {
      const root = join(repoRoot, parent, dir);
      if (existsSync(join(root, "vitest.config.ts"))) {
        const { name } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
        found.push({ name, release: RELEASE_CHECKS.some((file) => existsSync(join(root, file))) });
      }
    }
  }
  return found;
}

/** The two test lanes, then the release checks of every project that has them. */
function lanes() {
  const release = projects()
    .filter((p) => p.release)
    .map((p) => p.name);
  return [...TEST_LANES.map((names) => ({ names, files: "tests" })), { names: release, files: "release" }];
}

function checkLanes() {
  const laned = TEST_LANES.flat();
  const all = projects().map((p) => p.name);
  const problems = [
    ...all.filter((name) => !laned.includes(name)).map((name) => `${name} has tests but is in no lane`),
    ...laned.filter((name, i) => laned.indexOf(name) !== i).map((name) => `${name} is in two lanes`),
    ...laned.filter((name) => !all.includes(name)).map((name) => `${name} is not a project with tests`),
  ];
  if (problems.length > 0) {
    console.error(`tooling/vitest-config/lanes.js: ${problems.join("; ")}`);
    process.exit(2);
  }
}

function runLane(index, names, env) {
  const label = `[${index + 1}] `;
  const args = ["run", ...names.flatMap((name) => ["--project", name])];
  const started = Date.now();
  return new Promise((done) => {
    const child = spawn(vitest, args, { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"] });
    for (const [stream, out] of [
      [child.stdout, process.stdout],
      [child.stderr, process.stderr],
    ]) {
      let rest = "";
      stream.setEncoding("utf8");
      stream.on("data", (chunk) => {
        const lines = (rest + chunk).split("\n");
        rest = lines.pop();
        for (const line of lines) out.write(`${label}${line}\n`);
      });
      stream.on("end", () => rest && out.write(`${label}${rest}\n`));
    }
    child.on("close", (code, signal) =>
      done({ code: code ?? 1, signal, seconds: (Date.now() - started) / 1000 }),
    );
  });
}

function plain(args) {
  const child = spawn(vitest, ["run", ...args], { cwd: repoRoot, stdio: "inherit" });
  child.on("close", (code) => process.exit(code ?? 1));
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length > 0) return plain(args);
  checkLanes();
  const LANES = lanes();
  const report = process.env.SHARDKIT_TEST_REPORT;
  const work = mkdtempSync(join(tmpdir(), "shardkit-test-run-"));
  const cache = join(work, "packs");
  const started = Date.now();
  try {
    const results = await Promise.all(
      LANES.map(({ names, files }, i) => {
        const env = {
          ...process.env,
          SHARDKIT_PACK_CACHE: cache,
          SHARDKIT_TEST_FILES: files,
          SHARDKIT_TEST_REPORT: join(work, `lane-${i + 1}.json`),
        };
        if (!report) delete env.SHARDKIT_TEST_REPORT;
        return runLane(i, names, env);
      }),
    );
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    for (const [i, r] of results.entries()) {
      const outcome = r.code === 0 ? "passed" : "FAILED";
      const what = LANES[i].files === "release" ? "release checks of " : "";
      console.log(
        `lane ${i + 1} (${what}${LANES[i].names.join(", ")}): ${outcome} in ${r.seconds.toFixed(0)} s`,
      );
    }
    console.log(`all lanes: ${seconds} s`);
    if (report)
      writeFileSync(report, JSON.stringify(merge(results.map((_, i) => join(work, `lane-${i + 1}.json`)))));
    process.exitCode = results.every((r) => r.code === 0) ? 0 : 1;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** One report of the lanes' JSON reports: a lane that wrote none counts as failed. */
function merge(files) {
  const merged = { numPassedTests: 0, numFailedTests: 0, numTotalTests: 0, success: true, testResults: [] };
  for (const file of files) {
    let lane;
    try {
      lane = JSON.parse(readFileSync(file, "utf8"));
    } catch {
      merged.success = false;
      continue;
    }
    merged.numPassedTests += lane.numPassedTests;
    merged.numFailedTests += lane.numFailedTests;
    merged.numTotalTests += lane.numTotalTests;
    merged.success &&= lane.success !== false;
    merged.testResults.push(...lane.testResults);
  }
  return merged;
}

await main();
