import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { patient } from "@shardkit/test-db";
import { checkPublishedPackage, valueExportsOf } from "@shardkit/vitest-config/quality";
import { describe, expect, inject, it } from "vitest";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

describe("published package", () => {
  it(
    "the README example is examples/consumer.ts verbatim, it runs against the machine's NATS server, and the packed package passes publint and are-the-types-wrong and imports from ESM and CommonJS in a fresh project",
    async () => {
      const example = readFileSync(`${pkgDir}/examples/consumer.ts`, "utf8");
      expect(readFileSync(`${pkgDir}/README.md`, "utf8")).toContain(example);
      // The example runs in its own process while the pack check (synchronous) runs in this one.
      const running = promisify(execFile)(`${pkgDir}/node_modules/.bin/tsx`, ["examples/consumer.ts"], {
        cwd: pkgDir,
        encoding: "utf8",
        env: { ...process.env, NATS_URL: inject("natsUrl") },
        timeout: 120_000,
      });
      running.catch(() => {}); // awaited below

      const report = checkPublishedPackage(pkgDir, {
        alsoPack: ["../../id", "../../scatter", "../../prisma"].map((dir) =>
          fileURLToPath(new URL(dir, import.meta.url)),
        ),
      });
      expect(report.name).toBe("@shardkit/nats");
      expect(report.publint).not.toMatch(/warning|error|suggestion/i);
      expect(report.attw.ok, report.attw.output).toBe(true);
      const api = valueExportsOf(`${pkgDir}/src/index.ts`);
      expect(report.esm).toEqual(api);
      expect(report.cjs).toEqual(api);

      const { stdout } = await running;
      expect(stdout.trim().split("\n")).toEqual([
        "relay: 2 events delivered, 2 second publishes acked as duplicates",
        "ledger: 2 applied, 0 recognised, balance 350",
        "ledger-replay: 0 applied, 2 recognised, balance 350",
      ]);
    },
    patient(300_000),
  );
});
