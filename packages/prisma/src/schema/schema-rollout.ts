// Schema rollout: a Prisma schema (push) or a migrations folder (migrate) to every target database
// through the WebAssembly schema engine (`schema-engine.ts`), a limited number at a time, with a
// fingerprint recorded after each success so that a later rollout may skip the engine where the
// fingerprint still matches (`schema-fingerprint.ts`).
import { readdir, readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { SqlMigrationAwareDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import type { ShardIdentifier } from "@shardkit/id";
import { scatter } from "@shardkit/scatter";
import { RolloutOptionsError, SchemaRolloutError } from "../errors.js";
import { withRolloutLock } from "./rollout-lock.js";
import type { RolloutReport, RolloutTargetReport } from "./rollout-report.js";
import { engineVersion, withEngine } from "./schema-engine.js";
import {
  type CheckedState,
  checkFingerprint,
  fingerprintOf,
  recordFingerprint,
} from "./schema-fingerprint.js";

/** One physical database to roll the schema out to. */
export interface RolloutTarget {
  /** Shown in progress and the report, e.g. "db-a (shards 0/0, 0/1)". */
  name: string;
  /** A driver adapter factory for it, e.g. `new PrismaPg({ connectionString })` or `new PrismaPGlite(pglite)`. */
  adapter: SqlMigrationAwareDriverAdapterFactory;
  /** The logical shards it holds (reported only). */
  shards?: readonly ShardIdentifier[];
}

export interface RolloutOptions {
  targets: readonly RolloutTarget[];
  /** Path to a `schema.prisma` file (or a folder of .prisma files). Required for `push`. */
  schema?: string;
  /**
   * `'push'` (default when no `migrations`): make each database match the schema, like `prisma db push`.
   * `'migrate'`: apply the migrations folder (like `prisma migrate deploy`); applied ones are skipped.
   */
  mode?: "push" | "migrate";
  /** The migrations folder (with `migration_lock.toml`), for `mode: 'migrate'`. */
  migrations?: string;
  /** Push even when it would lose data (drop a column, ...). Default false: such a push fails. */
  acceptDataLoss?: boolean;
  /**
   * Skip the schema engine on a target whose recorded fingerprint matches this rollout (same schema
   * files or migrations, mode and engine version) and whose schema has not changed since: it reports
   * `unchanged` with `fingerprint: 'matched'`. One cheap statement per target, up to 16 at a time,
   * before any engine runs. Default false: the engine compares every target with the schema, which
   * is what repairs a database changed by hand in a way the check cannot see (`shardkit rollout`).
   * `openShards` always skips.
   */
  skipUnchanged?: boolean;
  /**
   * How many targets the engine works on at once (each on an engine instance of its own). Default 1:
   * one after another in the given order. Progress events then interleave; the report keeps the
   * targets' order either way.
   */
  concurrency?: number;
  /**
   * How long a target waits for its database's rollout lock while another rollout holds it (another
   * service starting): then that target fails with `RolloutLockTimeoutError` naming the holder (pid,
   * application_name). Default 120000 (2 minutes).
   */
  lockTimeoutMs?: number;
  /** Called as each target starts and ends. Default: one line per event on stderr. */
  onProgress?: (event: RolloutEvent) => void;
}

export type RolloutEvent =
  | {
      type: "start";
      index: number;
      total: number;
      target: string;
      /**
       * True when the schema engine runs on the target next (a push or migrations: the long step;
       * the first in a process also compiles the engine); false when it is done without it (its
       * fingerprint matched, or its check failed).
       */
      applying: boolean;
    }
  | { type: "done"; index: number; total: number; target: string; report: RolloutTargetReport };

/** How many fingerprint checks run at once (one connection each). */
const CHECKS_AT_ONCE = 16;

/**
 * Applies a Prisma schema (push) or a migrations folder (migrate) to every target through Prisma's
 * WebAssembly schema engine (no native binary), `concurrency` at a time (default one after another,
 * in the given order), and records a fingerprint of what it applied on each (see `skipUnchanged`).
 * At the first failure no further target starts (those are `skipped`; ones already under way finish
 * and are reported) and it throws `SchemaRolloutError` with the report; rerunning is safe: targets
 * already up to date report `unchanged`.
 */
export async function rolloutSchema(options: RolloutOptions): Promise<RolloutReport> {
  const { report, failure } = await runRollout(options);
  if (!report.ok) throw new SchemaRolloutError(report, failure);
  return report;
}

/** What `runRollout` takes beyond `RolloutOptions` (for `openShards`). */
export interface RolloutRunOptions extends RolloutOptions {
  /**
   * Whether an error says the target is unreachable for now. Such a failure does not stop the
   * rollout (the others go on), and a fingerprint check failing so fails its target at once instead
   * of running the engine on it. Default: none is (every failure stops the rollout; a check that
   * fails for any reason lets the engine run).
   */
  unreachable?: (error: unknown) => boolean;
  /**
   * Runs a target's fingerprint check (against `fingerprint`), e.g. within a deadline, or answers
   * it from what the caller already asked. Default: runs it as it is.
   */
  checkWithin?: (
    target: RolloutTarget,
    check: () => Promise<CheckedState>,
    fingerprint: string,
  ) => Promise<CheckedState>;
}

/**
 * `rolloutSchema` without the throw: the report, and each failed target's error by index.
 * Longer than 80 lines: every target's rollout, its lock, report and error, in one pass.
 */
export async function runRollout(
  options: RolloutRunOptions,
): Promise<{ report: RolloutReport; failure: unknown; errors: Map<number, unknown> }> {
  const prepared = await prepare(options);
  const { mode } = prepared;
  const progress = options.onProgress ?? defaultProgress;
  const unreachable = options.unreachable ?? (() => false);
  const total = options.targets.length;
  const entries: RolloutTargetReport[] = options.targets.map((target) => ({
    name: target.name,
    shards: (target.shards ?? []).map((s) => s.key),
    status: "skipped",
    changes: 0,
    appliedMigrations: [],
    warnings: [],
    durationMs: 0,
  }));
  const report: RolloutReport = { mode, ok: true, targets: entries };
  const errors = new Map<number, unknown>();
  /** The first failure that stops the rollout (`null`: failed without an error, a push refused for data loss). */
  let failure: unknown;
  let stopped = false;
  const fail = (index: number, error: unknown) => {
    entries[index]!.status = "failed";
    report.ok = false;
    if (error !== null) errors.set(index, error);
    if (!stopped && (error === null || !unreachable(error))) {
      stopped = true;
      failure = error ?? undefined;
    }
  };
  const done = (index: number, started: number) => {
    const entry = entries[index]!;
    entry.durationMs = Math.round(performance.now() - started);
    progress({ type: "done", index, total, target: options.targets[index]!.name, report: entry });
  };
  const startedAt = new Map<number, number>();

  let pending = options.targets.map((_, index) => index);
  if (options.skipUnchanged) {
    const checkWithin = options.checkWithin ?? ((_target, check) => check());
    const unmatched = new Set<number>();
    // Each target's check records its own failure and never rejects; so does its rollout below.
    const check = async (index: number) => {
      if (stopped) return;
      const target = options.targets[index]!;
      const entry = entries[index]!;
      const started = performance.now();
      startedAt.set(index, started);
      try {
        entry.fingerprint = await checkWithin(
          target,
          () => checkFingerprint(target.adapter, prepared.fingerprint),
          prepared.fingerprint,
        ).catch((error: unknown) => {
          if (unreachable(error)) throw error; // the engine would not reach it either
          entry.warnings.push(`schema fingerprint not read: ${messageOf(error)}`);
          return "unreadable" as const;
        });
      } catch (error) {
        progress({ type: "start", index, total, target: target.name, applying: false });
        entry.error = messageOf(error);
        fail(index, error);
        return done(index, started);
      }
      if (entry.fingerprint !== "matched") return void unmatched.add(index);
      progress({ type: "start", index, total, target: target.name, applying: false });
      entry.status = "unchanged";
      done(index, started);
    };
    await scatter(pending, check, { concurrency: CHECKS_AT_ONCE, abortable: false });
    pending = pending.filter((index) => unmatched.has(index));
  }

  const rollOut = async (index: number) => {
    if (stopped) return;
    const target = options.targets[index]!;
    const entry = entries[index]!;
    const started = startedAt.get(index) ?? performance.now();
    progress({ type: "start", index, total, target: target.name, applying: true });
    try {
      // Under the database's rollout lock: a rollout started at the same time elsewhere (another
      // service's start) waits, then its engine compares the database with the schema again.
      await withRolloutLock(
        target.adapter,
        () => pushOrMigrate(prepared, options, target, entry),
        options.lockTimeoutMs,
      );
    } catch (error) {
      entry.error = messageOf(error);
      fail(index, error);
      return done(index, started);
    }
    if (entry.error !== undefined) {
      fail(index, null); // a push refused for data loss: nothing applied, nothing recorded
      return done(index, started);
    }
    entry.status = entry.changes > 0 ? "applied" : "unchanged";
    // The rollout succeeded: what it applied is what the database has. Failing to record it costs
    // the next open an engine run, nothing more: a warning, not a failure.
    await recordFingerprint(target.adapter, {
      fingerprint: prepared.fingerprint,
      mode,
      engine: prepared.engine,
    }).catch((error: unknown) => {
      entry.warnings.push(
        `schema fingerprint not recorded (the next check runs the engine): ${messageOf(error)}`,
      );
    });
    done(index, started);
  };
  const concurrency = positiveInteger(options.concurrency, "concurrency");
  await scatter(pending, rollOut, { concurrency, abortable: false });
  return { report, failure, errors };
}

/** Runs the engine on `target`: a push of the schema or its migrations, noted in `entry`. */
async function pushOrMigrate(
  prepared: Prepared,
  options: RolloutOptions,
  target: RolloutTarget,
  entry: RolloutTargetReport,
): Promise<void> {
  await withEngine(prepared.files, target.adapter, async (engine) => {
    if (prepared.mode === "push") {
      const result = await engine.schemaPush({
        schema: { files: prepared.files.map(([path, content]) => ({ path, content })) },
        force: options.acceptDataLoss ?? false,
        filters: NO_FILTERS,
      });
      entry.warnings.push(...result.warnings, ...result.unexecutable);
      if (result.executedSteps === 0 && entry.warnings.length > 0) {
        entry.error = `push not applied: ${entry.warnings.join("; ")} (pass acceptDataLoss to force it)`;
      }
      entry.changes = result.executedSteps;
    } else {
      const result = await engine.applyMigrations({
        migrationsList: prepared.migrationsList!,
        filters: NO_FILTERS,
      });
      entry.appliedMigrations = result.appliedMigrationNames;
      entry.changes = result.appliedMigrationNames.length;
    }
  });
}

function positiveInteger(value: number | undefined, name: string): number {
  if (value === undefined) return 1;
  if (!(Number.isInteger(value) && value > 0)) {
    throw new RolloutOptionsError(`rolloutSchema: ${name} must be a positive integer, got ${value}`);
  }
  return value;
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The fingerprint a rollout with `options` records, and checks with `skipUnchanged`. */
export async function rolloutFingerprint(options: Omit<RolloutOptions, "targets">): Promise<string> {
  return (await prepare(options)).fingerprint;
}

type Prepared = Awaited<ReturnType<typeof prepare>>;

/** What every target gets: the mode, the schema files, the migrations, and their fingerprint. */
async function prepare(options: Omit<RolloutOptions, "targets">) {
  const mode = options.mode ?? (options.migrations ? "migrate" : "push");
  if (mode === "push" && !options.schema) throw new RolloutOptionsError("rolloutSchema: push needs `schema`");
  if (mode === "migrate" && !options.migrations) {
    throw new RolloutOptionsError("rolloutSchema: migrate needs `migrations`");
  }
  positiveInteger(options.concurrency, "concurrency"); // before any target is touched
  positiveInteger(options.lockTimeoutMs, "lockTimeoutMs");
  const files = options.schema
    ? await readSchemaFiles(options.schema).catch((error: unknown) => {
        throw new RolloutOptionsError(
          `rolloutSchema: cannot read the schema ${options.schema}: ${(error as Error).message}`,
        );
      })
    : [["schema.prisma", EMPTY_DATAMODEL] as const];
  const migrationsList =
    mode === "migrate"
      ? await readMigrations(options.migrations!).catch((error: unknown) => {
          throw new RolloutOptionsError(
            `rolloutSchema: cannot read the migrations folder ${options.migrations}: ${(error as Error).message}`,
          );
        })
      : undefined;
  const engine = await engineVersion();
  // Push: the files' contents, whatever their names or folder (a schema deployed elsewhere is the
  // same schema). Migrate: each migration's name and SQL, and the lock file; the schema files
  // then only name the datasource.
  const parts = migrationsList
    ? [
        migrationsList.lockfile.content ?? "",
        ...migrationsList.migrationDirectories.flatMap((m) => [m.path, m.migrationFile.content.value]),
      ]
    : files.map(([, content]) => content).sort();
  return { mode, files, migrationsList, engine, fingerprint: fingerprintOf(mode, engine, parts) };
}

function defaultProgress(event: RolloutEvent): void {
  const at = `[${event.index + 1}/${event.total}]`;
  if (event.type === "start") process.stderr.write(`schema rollout ${at} ${event.target}: started\n`);
  else {
    const r = event.report;
    const detail =
      r.error ??
      (r.fingerprint === "matched"
        ? "fingerprint matched"
        : r.appliedMigrations.length
          ? r.appliedMigrations.join(", ")
          : `${r.changes} change(s)`);
    process.stderr.write(
      `schema rollout ${at} ${event.target}: ${r.status} (${detail}) in ${r.durationMs} ms\n`,
    );
  }
}

const NO_FILTERS = { externalTables: [] as string[], externalEnums: [] as string[] };
const EMPTY_DATAMODEL = 'datasource db {\n  provider = "postgresql"\n}\n';

async function readSchemaFiles(path: string): Promise<(readonly [string, string])[]> {
  const abs = resolve(path);
  if ((await stat(abs)).isDirectory()) {
    const names = (await readdir(abs)).filter((n) => n.endsWith(".prisma")).sort();
    return Promise.all(names.map(async (n) => [join(abs, n), await readFile(join(abs, n), "utf8")] as const));
  }
  return [[abs, await readFile(abs, "utf8")] as const];
}

async function readMigrations(dir: string) {
  const abs = resolve(dir);
  const lock = await readFile(join(abs, "migration_lock.toml"), "utf8").catch(() => null);
  const migrationDirectories = [];
  for (const name of (await readdir(abs)).sort()) {
    if (!(await stat(join(abs, name))).isDirectory()) continue;
    const content = await readFile(join(abs, name, "migration.sql"), "utf8").then(
      (value) => ({ tag: "ok" as const, value }),
      (err: Error) => ({ tag: "error" as const, value: err.message }),
    );
    migrationDirectories.push({ path: name, migrationFile: { path: "migration.sql", content } });
  }
  return {
    baseDir: abs,
    lockfile: { path: "migration_lock.toml", content: lock },
    shadowDbInitScript: "",
    migrationDirectories,
  };
}
