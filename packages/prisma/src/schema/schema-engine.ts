// Prisma's schema engine as WebAssembly (no native binary): its instances, shared by every copy of
// this package in a process, and one engine run against one database through a driver adapter.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import {
  bindMigrationAwareSqlAdapterFactory,
  type ErrorRegistry,
  type SqlMigrationAwareDriverAdapterFactory,
} from "@prisma/driver-adapter-utils";

type WasmApi = {
  compile(bytes: Uint8Array): Promise<object>;
  instantiate(module: object, imports: object): Promise<{ exports: Record<string, unknown> }>;
  RuntimeError: new (...args: never[]) => Error;
};
type Bg = typeof import("@prisma/schema-engine-wasm/schema_engine_bg");
export type Engine = Awaited<ReturnType<Bg["SchemaEngine"]["new"]>>;

/**
 * At most this many engine instances per process, whatever the rollouts running at once ask for
 * (each holds its own wasm memory, a few MB). A rollout waits for a free one past that.
 */
export const MAX_ENGINES = 8;

/**
 * The engine's JS glue is a module holding its wasm instance in a module-level variable, so one
 * module instance can drive one wasm instance. Each engine instance here is the glue imported
 * under a URL of its own (`schema_engine_bg.js?shardkit-engine=N`: Node keeps one module per URL)
 * with a wasm instance of its own (compiled once): engines on different instances share no state
 * and can work at the same time. An instance runs one engine at a time.
 *
 * The instances live in a global, shared by every copy of this package in the process (a test
 * runner can load both the source and the build): two copies instantiating the same URL would swap
 * the wasm instance under an engine at work.
 */
const SHARED = Symbol.for("@shardkit/prisma:schema-engines");
interface Slot {
  bg: Promise<Bg>;
  busy: boolean;
}
interface Shared {
  compiled?: Promise<{ module: object; bgPath: string }>;
  slots: Slot[];
  /** Rollouts waiting for a free instance, first come first served. */
  waiting: ((slot: Slot) => void)[];
  /** The number of instances made so far (each gets a URL of its own). */
  made: number;
}
function shared(): Shared {
  const g = globalThis as { [SHARED]?: Shared };
  g[SHARED] ??= { slots: [], waiting: [], made: 0 };
  return g[SHARED];
}

const wasmApi = () => (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

/** Compiles the engine's wasm once per process (Node 20 cannot import .wasm as ESM). */
function compiled(): NonNullable<Shared["compiled"]> {
  const state = shared();
  state.compiled ??= (async () => {
    const require = createRequire(import.meta.url);
    const bgPath = require.resolve("@prisma/schema-engine-wasm/schema_engine_bg");
    const bytes = await readFile(join(dirname(bgPath), "schema_engine_bg.wasm"));
    return { module: await wasmApi().compile(bytes), bgPath };
  })();
  return state.compiled;
}

/** A new engine instance: the glue under a URL of its own, bound to a wasm instance of its own. */
async function instantiate(): Promise<Bg> {
  const state = shared();
  // A Rust panic inside the engine reports through this global; without it the message is lost.
  const g = globalThis as { PRISMA_WASM_PANIC_REGISTRY?: { set_message(m: string): void } };
  g.PRISMA_WASM_PANIC_REGISTRY ??= { set_message: () => {} };
  const { module, bgPath } = await compiled();
  const url = `${pathToFileURL(bgPath).href}?shardkit-engine=${++state.made}`;
  const bg = (await import(/* @vite-ignore */ url)) as Bg;
  // The engine arms long timers (10-60 s) it never clears, which would keep a finished process
  // alive for up to a minute: give it unref'd timers instead.
  const imports: Record<string, unknown> = { ...bg };
  for (const name of Object.keys(imports)) {
    if (name.startsWith("__wbg_setTimeout_")) {
      imports[name] = (fn: () => void, ms: number) => setTimeout(fn, ms >>> 0).unref();
    }
  }
  const instance = await wasmApi().instantiate(module, { "./schema_engine_bg.js": imports });
  (bg as unknown as { __wbg_set_wasm(exports: unknown): void }).__wbg_set_wasm(instance.exports);
  (instance.exports as { __wbindgen_start?: () => void }).__wbindgen_start?.();
  return bg;
}

/** A free engine instance, made when none is free and fewer than `MAX_ENGINES` exist; else the next one released. */
function acquire(): Promise<Slot> {
  const state = shared();
  const free = state.slots.find((s) => !s.busy);
  if (free) {
    free.busy = true;
    return Promise.resolve(free);
  }
  if (state.slots.length < MAX_ENGINES) {
    const slot: Slot = { bg: instantiate(), busy: true };
    state.slots.push(slot);
    return Promise.resolve(slot);
  }
  return new Promise((resolve) => state.waiting.push(resolve));
}

function release(slot: Slot): void {
  const next = shared().waiting.shift();
  if (next) next(slot);
  else slot.busy = false;
}

/**
 * Runs `fn` with a schema engine for `files` connected through `adapter`, on an engine instance no
 * other engine uses meanwhile; every connection the engine opened is closed afterwards. An instance
 * whose wasm trapped (a Rust panic) is replaced: its memory may be left half-changed.
 */
export async function withEngine<T>(
  files: readonly (readonly [string, string])[],
  adapter: SqlMigrationAwareDriverAdapterFactory,
  fn: (engine: Engine) => Promise<T>,
): Promise<T> {
  const slot = await acquire();
  try {
    const bg = await slot.bg;
    const tracked = trackAdapters(adapter);
    const bound = bindMigrationAwareSqlAdapterFactory(tracked.factory);
    const engine = await bg.SchemaEngine.new(
      { datamodels: files.map(([p, c]) => [p, c]) },
      () => {},
      bound,
    ).catch((error: unknown) => {
      throw adapterError(bound, error);
    });
    try {
      return await fn(engine);
    } catch (error) {
      throw adapterError(bound, error);
    } finally {
      engine.free();
      await tracked.disposeAll();
    }
  } catch (error) {
    if (error instanceof wasmApi().RuntimeError) {
      slot.bg = instantiate();
      slot.bg.catch(() => {}); // its own user sees a failure to make it
    }
    throw error;
  } finally {
    release(slot);
  }
}

/**
 * The adapter's own error behind an engine error that only names it (`External error id#N`: an
 * adapter threw something other than a driver adapter error, e.g. a failed connection), so that
 * the report says what happened and callers can tell an unreachable database.
 */
function adapterError(bound: { errorRegistry: ErrorRegistry }, error: unknown): unknown {
  const id = /External error id#(\d+)/.exec(String((error as Error | undefined)?.message ?? ""))?.[1];
  return (id === undefined ? undefined : bound.errorRegistry.consumeError(Number(id)))?.error ?? error;
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

/** The schema engine's version (`@prisma/schema-engine-wasm`'s), part of every fingerprint. */
export async function engineVersion(): Promise<string> {
  const require = createRequire(import.meta.url);
  const bgPath = require.resolve("@prisma/schema-engine-wasm/schema_engine_bg");
  const pkg = JSON.parse(await readFile(join(dirname(bgPath), "package.json"), "utf8")) as {
    version: string;
  };
  return pkg.version;
}
