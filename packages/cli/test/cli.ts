// Runs the real `shardkit` binary (dist/cli.js) in a child process, as a user or a script does.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PrismaPg } from "@prisma/adapter-pg";
import { rolloutSchema } from "@shardkit/prisma/rollout";
import { createDatabase, dropDatabase, patient } from "@shardkit/test-db";
import { afterAll, beforeAll } from "vitest";

export const BIN = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
export const SCHEMA = fileURLToPath(new URL("./schema.prisma", import.meta.url));

/** A timeout for questions to databases that are up (scaled by the machine's load): on a loaded machine a first query can take seconds. */
export const SLOW = ["--timeout", String(patient(20_000))];

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `shardkit ...args` with stdout and stderr as pipes (not a terminal), and SHARDKIT_SHARDS unset unless
 * given; killed once `timeoutMs` (scaled by the machine's load) has passed.
 */
export function shardkit(
  args: string[],
  options: { env?: Record<string, string>; input?: string; timeoutMs?: number } = {},
): Promise<CliRun> {
  const { SHARDKIT_SHARDS: _, ...env } = process.env;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), patient(options.timeoutMs ?? 50_000));
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}

/** This test file's temporary folder: removed after its tests, so a run leaves no file behind. */
export const scratch = mkdtempSync(join(tmpdir(), "shardkit-cli-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A configuration file (the `SHARDKIT_SHARDS` JSON) in this file's temporary folder; its path. */
export function configFile(name: string, config: unknown): string {
  const path = join(scratch, `${name}.json`);
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
}

/**
 * This test file's databases, one per key on the server at its port, made with the test schema
 * before the file's tests and dropped after them. Their names (`sk_cli_<file>_<key>_<pid>`) are the
 * file's own, so runs beside this one never share one. The URLs are filled in before the tests run.
 */
export function testDatabases<K extends string>(
  file: string,
  ports: Record<K, number | { port: number }>,
): { names: Record<K, string>; urls: Record<K, string> } {
  const keys = Object.keys(ports) as K[];
  // A server's port is read when the databases are made (a file's own server is made just before).
  const portOf = (k: K) => {
    const at = ports[k];
    return typeof at === "number" ? at : at.port;
  };
  const names = Object.fromEntries(keys.map((k) => [k, `sk_cli_${file}_${k}_${process.pid}`])) as Record<
    K,
    string
  >;
  const urls = {} as Record<K, string>;
  beforeAll(async () => {
    const made = await Promise.all(keys.map((k) => createDatabase(portOf(k), names[k])));
    keys.forEach((k, i) => {
      urls[k] = made[i]!;
    });
    await rolloutSchema({
      schema: SCHEMA,
      targets: keys.map((k) => ({ name: k, adapter: new PrismaPg({ connectionString: urls[k] }) })),
      onProgress: () => {},
    });
  });
  afterAll(async () => {
    await Promise.all(keys.map((k) => dropDatabase(portOf(k), names[k])));
  });
  return { names, urls };
}
