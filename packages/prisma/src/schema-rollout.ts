import { readdir, readFile, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import {
  bindMigrationAwareSqlAdapterFactory,
  type SqlMigrationAwareDriverAdapterFactory,
} from "@prisma/driver-adapter-utils";
import type { ShardIdentifier } from "@shardkit/id";
import { RolloutOptionsError, SchemaRolloutError } from "./errors.js";
import type { RolloutReport, RolloutTargetReport } from "./rollout-report.js";

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
  /** Called as each target starts and ends. Default: one line per event on stderr. */
  onProgress?: (event: RolloutEvent) => void;
}

export type RolloutEvent =
  | { type: "start"; index: number; total: number; target: string }
  | { type: "done"; index: number; total: number; target: string; report: RolloutTargetReport };

/**
 * Applies a Prisma schema (push) or a migrations folder (migrate) to every target, one at a time
 * in the given order, through Prisma's WebAssembly schema engine (no native binary). Stops at the
 * first failure (later targets are `skipped`) and throws `SchemaRolloutError` with the report;
 * rerunning is safe: targets already up to date report `unchanged`.
 */
export async function rolloutSchema(options: RolloutOptions): Promise<RolloutReport> {
  const mode = options.mode ?? (options.migrations ? "migrate" : "push");
  if (mode === "push" && !options.schema) throw new RolloutOptionsError("rolloutSchema: push needs `schema`");
  if (mode === "migrate" && !options.migrations) {
    throw new RolloutOptionsError("rolloutSchema: migrate needs `migrations`");
  }
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
  const progress = options.onProgress ?? defaultProgress;
  const total = options.targets.length;
  const report: RolloutReport = { mode, ok: true, targets: [] };
  /** The first failing target's error (`null`: it failed without one, a push refused for data loss). */
  let failure: unknown;
  let failed = false;
  for (const [index, target] of options.targets.entries()) {
    const entry: RolloutTargetReport = {
      name: target.name,
      shards: (target.shards ?? []).map((s) => s.key),
      status: "skipped",
      changes: 0,
      appliedMigrations: [],
      warnings: [],
      durationMs: 0,
    };
    report.targets.push(entry);
    if (failed) continue;
    progress({ type: "start", index, total, target: target.name });
    const started = performance.now();
    try {
      await withEngine(files, target.adapter, async (engine) => {
        if (mode === "push") {
          const result = await engine.schemaPush({
            schema: { files: files.map(([path, content]) => ({ path, content })) },
            force: options.acceptDataLoss ?? false,
            filters: NO_FILTERS,
          });
          entry.warnings = [...result.warnings, ...result.unexecutable];
          if (result.executedSteps === 0 && entry.warnings.length > 0) {
            entry.error = `push not applied: ${entry.warnings.join("; ")} (pass acceptDataLoss to force it)`;
          }
          entry.changes = result.executedSteps;
        } else {
          const result = await engine.applyMigrations({
            migrationsList: migrationsList!,
            filters: NO_FILTERS,
          });
          entry.appliedMigrations = result.appliedMigrationNames;
          entry.changes = result.appliedMigrationNames.length;
        }
      });
      entry.status = entry.error !== undefined ? "failed" : entry.changes > 0 ? "applied" : "unchanged";
    } catch (error) {
      entry.status = "failed";
      entry.error = error instanceof Error ? error.message : String(error);
      failure = error;
    }
    if (entry.status === "failed") {
      report.ok = false;
      failed = true;
    }
    entry.durationMs = Math.round(performance.now() - started);
    progress({ type: "done", index, total, target: target.name, report: entry });
  }
  if (failed) throw new SchemaRolloutError(report, failure);
  return report;
}

function defaultProgress(event: RolloutEvent): void {
  const at = `[${event.index + 1}/${event.total}]`;
  if (event.type === "start") process.stderr.write(`schema rollout ${at} ${event.target}: applying\n`);
  else {
    const r = event.report;
    const detail =
      r.error ?? (r.appliedMigrations.length ? r.appliedMigrations.join(", ") : `${r.changes} change(s)`);
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

// ---- the WebAssembly schema engine -------------------------------------------------------------

type WasmApi = {
  instantiate(
    bytes: Uint8Array,
    imports: object,
  ): Promise<{ instance: { exports: Record<string, unknown> } }>;
};
type Bg = typeof import("@prisma/schema-engine-wasm/schema_engine_bg");
type Engine = Awaited<ReturnType<Bg["SchemaEngine"]["new"]>>;
/**
 * One engine per process, shared by every copy of this package in it (a test runner can load
 * both the source and the build): the engine's JS glue is one module with one wasm instance in a
 * global, so a second instantiation would swap the instance under an engine at work. Engines also
 * take turns: each rollout step runs alone.
 */
const SHARED = Symbol.for("@shardkit/prisma:schema-engine");
type Shared = { loading?: Promise<Bg>; turn: Promise<unknown> };
function shared(): Shared {
  const g = globalThis as { [SHARED]?: Shared };
  g[SHARED] ??= { turn: Promise.resolve() };
  return g[SHARED];
}

/** Runs `fn` when no other engine of this process is at work. */
function inTurn<T>(fn: () => Promise<T>): Promise<T> {
  const state = shared();
  const run = state.turn.then(fn, fn);
  state.turn = run.catch(() => {});
  return run;
}

/** Instantiates the schema engine's wasm once per process (Node 20 cannot import .wasm as ESM). */
function loadEngine(): Promise<Bg> {
  const state = shared();
  state.loading ??= (async () => {
    // A Rust panic inside the engine reports through this global; without it the message is lost.
    const g = globalThis as { PRISMA_WASM_PANIC_REGISTRY?: { set_message(m: string): void } };
    g.PRISMA_WASM_PANIC_REGISTRY ??= { set_message: () => {} };
    const require = createRequire(import.meta.url);
    const bgPath = require.resolve("@prisma/schema-engine-wasm/schema_engine_bg");
    const bg = (await import("@prisma/schema-engine-wasm/schema_engine_bg")) as Bg;
    const bytes = await readFile(join(dirname(bgPath), "schema_engine_bg.wasm"));
    // The engine arms long timers (10-60 s) it never clears, which would keep a finished process
    // alive for up to a minute: give it unref'd timers instead.
    const imports: Record<string, unknown> = { ...bg };
    for (const name of Object.keys(imports)) {
      if (name.startsWith("__wbg_setTimeout_")) {
        imports[name] = (fn: () => void, ms: number) => setTimeout(fn, ms >>> 0).unref();
      }
    }
    const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
    const { instance } = await wasm.instantiate(bytes, { "./schema_engine_bg.js": imports });
    (bg as unknown as { __wbg_set_wasm(exports: unknown): void }).__wbg_set_wasm(instance.exports);
    (instance.exports as { __wbindgen_start?: () => void }).__wbindgen_start?.();
    return bg;
  })();
  return state.loading;
}

async function withEngine<T>(
  files: (readonly [string, string])[],
  adapter: SqlMigrationAwareDriverAdapterFactory,
  fn: (engine: Engine) => Promise<T>,
): Promise<T> {
  return inTurn(() => runEngine(files, adapter, fn));
}

async function runEngine<T>(
  files: (readonly [string, string])[],
  adapter: SqlMigrationAwareDriverAdapterFactory,
  fn: (engine: Engine) => Promise<T>,
): Promise<T> {
  const bg = await loadEngine();
  const tracked = trackAdapters(adapter);
  const engine = await bg.SchemaEngine.new(
    { datamodels: files.map(([p, c]) => [p, c]) },
    () => {},
    bindMigrationAwareSqlAdapterFactory(tracked.factory),
  );
  try {
    return await fn(engine);
  } finally {
    engine.free();
    await tracked.disposeAll();
  }
}

/**
 * Wraps the adapter factory so every connection the engine opens is closed afterwards (freeing
 * the engine does not dispose them; a pg pool left open keeps the process alive). For
 * @prisma/adapter-pg 7.10 it also maps PostgreSQL's internal `"char"` type (OID 18), which the
 * engine reads from pg_catalog and the adapter cannot decode, to text.
 */
function trackAdapters(inner: SqlMigrationAwareDriverAdapterFactory) {
  const live = new Set<{ dispose(): Promise<void> }>();
  const fixChar = inner.adapterName === "@prisma/adapter-pg";
  const patchQueryable = <Q>(q: Q): Q => {
    const target = q as { performIO?: (query: unknown) => Promise<{ fields?: { dataTypeID: number }[] }> };
    if (!fixChar || typeof target.performIO !== "function") return q;
    const performIO = target.performIO.bind(target);
    target.performIO = async (query) => {
      const result = await performIO(query);
      if (result?.fields?.some((f) => f.dataTypeID === 18)) {
        result.fields = result.fields.map((f) => (f.dataTypeID === 18 ? { ...f, dataTypeID: 25 } : f));
      }
      return result;
    };
    return q;
  };
  const track = <
    A extends { dispose(): Promise<void>; startTransaction(...args: never[]): Promise<unknown> },
  >(
    adapter: A,
  ): A => {
    live.add(adapter);
    patchQueryable(adapter);
    const startTransaction = adapter.startTransaction.bind(adapter);
    (adapter as { startTransaction: unknown }).startTransaction = async (...args: never[]) =>
      patchQueryable(await startTransaction(...args));
    const dispose = adapter.dispose.bind(adapter);
    adapter.dispose = async () => {
      live.delete(adapter);
      await dispose();
    };
    return adapter;
  };
  const factory: SqlMigrationAwareDriverAdapterFactory = {
    provider: inner.provider,
    adapterName: inner.adapterName,
    connect: async () => track(await inner.connect()),
    connectToShadowDb: async () => track(await inner.connectToShadowDb()),
  };
  return {
    factory,
    async disposeAll() {
      const all = [...live];
      live.clear();
      await Promise.all(all.map((a) => a.dispose()));
    },
  };
}
