import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { expect } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  version: string;
};
describePublishedPackage(pkgDir, {
  title:
    "passes publint and are-the-types-wrong, imports from ESM and CommonJS, its binary runs in a fresh project, and its dashboard serves every file of its page",
  timeoutMs: 300_000,
  scripts: {
    // The installed binary, as `npx shardkit` runs it: its version, and a scorecard from stdin.
    bin: `import { execFileSync } from "node:child_process";
const run = (args, input) => execFileSync("node_modules/.bin/shardkit", args, { encoding: "utf8", input });
console.log(run(["--version"]).trim());
const sample = ['{"t":"a"}', '{"t":"b","op":"write"}', '{"t":"a"}'].join("\\n");
console.log(JSON.parse(run(["analyze", "-", "--key", "t", "--members", "2", "--json"], sample)).candidates[0].scorecard.cardinality);`,
    // The installed dashboard serves its page: every file the page names, and every module those
    // import, answers 200 (a database that does not answer is enough to start it).
    page: String.raw`import { writeFileSync } from "node:fs";
import { startDashboard } from "@shardkit/cli";
writeFileSync("shards.json", JSON.stringify([{ group: 0, member: 0, url: "postgresql://postgres@127.0.0.1:1/nowhere" }]));
const dashboard = await startDashboard({ config: "shards.json", port: 0, timeoutMs: 2000 });
const origin = "http://127.0.0.1:" + dashboard.port;
const seen = new Map();
const load = async (path) => {
  if (seen.has(path)) return;
  const response = await fetch(origin + path);
  const text = await response.text();
  seen.set(path, response.status);
  const named = path === "/" ? [...text.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)] : [...text.matchAll(/from "\.\/([^"]+)"/g)].map((m) => [m[0], "/assets/" + m[1]]);
  for (const [, next] of named) await load(next);
};
await load("/");
await dashboard.close();
console.log(JSON.stringify(Object.fromEntries([...seen].sort())));`,
  },
  check: (report) => {
    expect(report.scripts.bin?.split("\n")).toEqual([version, "2"]); // its version, and the sample's cardinality (two keys)
    const page = JSON.parse(report.scripts.page!) as Record<string, number>;
    const modules = readdirSync(new URL("../dashboard", import.meta.url)).filter((f) => f.endsWith(".js"));
    expect(Object.keys(page)).toEqual(
      expect.arrayContaining(["/", "/assets/uplot.js", "/assets/uplot.css", "/assets/app.css"]),
    );
    for (const module of modules) expect(page[`/assets/${module}`], module).toBe(200);
    for (const [path, status] of Object.entries(page)) expect(status, path).toBe(200);
  },
});
