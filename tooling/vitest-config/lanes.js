#!/usr/bin/env node
// The repository's test run (`pnpm test`): every vitest project, in lanes that run side by side.
// A project's files run one at a time where they share databases (its own config says so); vitest
// alone would then run every such project one after another, leaving a core idle while a test waits
// out a lease or an npm install. Each lane runs one `vitest run` after another (one file at a time
// on two cores), each over some projects (or some files of one); every test file is in exactly one
// lane. The release checks (each package's src/package.test.ts: packing, publint,
// are-the-types-wrong, type resolution) open the last lane, so they lengthen neither of the two long
// lanes; the tests of that lane's projects follow them there (SHARDKIT_TEST_FILES and
// SHARDKIT_TEST_PARTS tell each project's config which of its files a run takes). Lines are prefixed
// with their lane. With SHARDKIT_TEST_REPORT set, the runs' JSON reports are merged into that file.
// Packages are packed once for the whole run (SHARDKIT_PACK_CACHE). Arguments (`pnpm test --
// --project @shardkit/id`) run one plain vitest over every file instead.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { RELEASE_CHECKS } from "./index.js";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const vitest = join(repoRoot, "node_modules/.bin/vitest");

/**
 * The projects whose tests each lane runs, balanced by the files' durations (docs/development.md):
 * the move tests with the small packages and most of the CLI's; prisma and the wallet app; and,
 * after the release checks of every project (the last lane), create-shardkit, whose end-to-end test
 * installs the templates from the tarballs those checks packed, the allocations and orders apps, four
 * of the CLI's longest files, and three of ownership's that share no server with its move tests (the
 * fleet's own server, the map's second server of the run's own, PGlite). An entry is a project (its
 * tests, but for the files another lane's entries take), or `{ project, only }`: those of its files
 * alone (paths relative to the package). Such a part runs beside the rest of its project, so its
 * files may share no server-wide state with them (a cluster one counts slots on; a cluster a test
 * stops or freezes is its run's own in any case, test-db's `ownCluster`): the CLI's part uses the
 * main server and a server of its status file's own, and shares the logical clusters' lifetime with
 * the rest through the global setup's `shareClusters`; ownership's part runs the project's global
 * setup again, making databases and clusters of its run's own.
 */
const TEST_LANES = [
  [
    "@shardkit/ownership",
    "@shardkit/cli",
    "@shardkit/nats",
    "@shardkit/id",
    "@shardkit/selector",
    "@shardkit/scatter",
  ],
  ["@shardkit/prisma", "@shardkit/wallet"],
  [
    "create-shardkit",
    "@shardkit/allocations",
    "@shardkit/orders",
    {
      project: "@shardkit/cli",
      only: ["test/balance.test.ts", "test/move.test.ts", "test/status.test.ts", "test/rollout.test.ts"],
    },
    { project: "@shardkit/ownership", only: ["src/fleet.test.ts", "src/map.test.ts", "src/pglite.test.ts"] },
  ],
];

/** A lane entry's project. */
const projectOf = (entry) => (typeof entry === "string" ? entry : entry.project);

/**
 * `SHARDKIT_TEST_PARTS` (index.js) of a run over `entries`: a part's files alone; a whole project
 * without the files that parts of it in other lanes take.
 */
function partsOf(entries) {
  const parts = {};
  for (const entry of entries) {
    if (typeof entry !== "string") parts[entry.project] = { only: entry.only };
    else {
      const skip = TEST_LANES.flat()
        .filter((e) => typeof e !== "string" && e.project === entry)
        .flatMap((e) => e.only);
      if (skip.length > 0) parts[entry] = { skip };
    }
  }
  return parts;
}

/** Every vitest project: its name, its folder, and whether it has release checks. */
function projects() {
  const found = [];
  for (const parent of ["packages", "apps"]) {
    for (const dir of readdirSync(join(repoRoot, parent))) {
      const root = join(repoRoot, parent, dir);
      if (existsSync(join(root, "vitest.config.ts"))) {
        const { name } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
        found.push({ name, root, release: RELEASE_CHECKS.some((file) => existsSync(join(root, file))) });
      }
    }
  }
  return found;
}

/** Each lane: its runs, one after another. The release checks of every project that has them open the last. */
function lanes() {
  const release = projects()
    .filter((p) => p.release)
    .map((p) => p.name);
  return TEST_LANES.map((entries, i) => [
    ...(i === TEST_LANES.length - 1 ? [{ names: release, files: "release" }] : []),
    { entries, names: entries.map(projectOf), files: "tests" },
  ]);
}

function checkLanes() {
  const laned = TEST_LANES.flat().filter((e) => typeof e === "string");
  const parts = TEST_LANES.flat().filter((e) => typeof e !== "string");
  const all = projects();
  const names = all.map((p) => p.name);
  const problems = [
    ...names.filter((name) => !laned.includes(name)).map((name) => `${name} has tests but is in no lane`),
    ...laned.filter((name, i) => laned.indexOf(name) !== i).map((name) => `${name} is in two lanes`),
    ...laned.filter((name) => !names.includes(name)).map((name) => `${name} is not a project with tests`),
    ...parts
      .filter((part) => !laned.includes(part.project))
      .map((part) => `a part of ${part.project} is laned, but not the project itself`),
    ...TEST_LANES.flatMap((entries) =>
      entries
        .filter((e) => typeof e !== "string" && entries.includes(e.project))
        .map((part) => `a part of ${part.project} is in the project's own lane`),
    ),
    ...parts.flatMap((part, i) =>
      part.only
        .filter((file) =>
          parts.some((other, j) => j < i && other.project === part.project && other.only.includes(file)),
        )
        .map((file) => `${part.project}'s ${file} is in two parts`),
    ),
    ...parts.flatMap((part) => {
      const root = all.find((p) => p.name === part.project)?.root;
      return part.only
        .filter((file) => !root || !existsSync(join(root, file)))
        .map((file) => `${part.project} has no test file ${file}`);
    }),
  ];
  if (problems.length > 0) {
    console.error(`tooling/vitest-config/lanes.js: ${problems.join("; ")}`);
    process.exit(2);
  }
}

/** One `vitest run` of a lane over `names`; resolves with its exit and duration. */
function runVitest(label, names, env) {
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

/** A lane's runs, one after another (each runs even when one before it failed). */
async function runLane(index, runs, env, reportOf) {
  const results = [];
  for (const [j, { names, files }] of runs.entries()) {
    const runEnv = {
      ...env,
      SHARDKIT_TEST_FILES: files,
      SHARDKIT_TEST_PARTS: JSON.stringify(files === "tests" ? partsOf(runs[j].entries) : {}),
      SHARDKIT_TEST_REPORT: reportOf(index, j),
    };
    if (!env.SHARDKIT_TEST_REPORT) delete runEnv.SHARDKIT_TEST_REPORT;
    results.push(await runVitest(`[${index + 1}] `, names, runEnv));
  }
  return results;
}

/** What a lane ran, for its summary line. */
function describeRun({ entries, names, files }, r) {
  const what =
    files === "release"
      ? `release checks of ${names.length} projects`
      : entries.map((e) => (typeof e === "string" ? e : `${e.project} (${e.only.join(", ")})`)).join(", ");
  return `${what} ${r.code === 0 ? "passed" : "FAILED"} in ${r.seconds.toFixed(0)} s`;
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
  const reportOf = (i, j) => join(work, `lane-${i + 1}-${j + 1}.json`);
  try {
    const results = await Promise.all(
      LANES.map((runs, i) => runLane(i, runs, { ...process.env, SHARDKIT_PACK_CACHE: cache }, reportOf)),
    );
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    for (const [i, lane] of results.entries()) {
      const total = lane.reduce((a, r) => a + r.seconds, 0);
      const runs = lane.map((r, j) => describeRun(LANES[i][j], r)).join("; then ");
      console.log(`lane ${i + 1} (${total.toFixed(0)} s): ${runs}`);
    }
    console.log(`all lanes: ${seconds} s`);
    if (report) {
      const files = LANES.flatMap((runs, i) => runs.map((_, j) => reportOf(i, j)));
      writeFileSync(report, JSON.stringify(merge(files)));
    }
    process.exitCode = results.flat().every((r) => r.code === 0) ? 0 : 1;
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
