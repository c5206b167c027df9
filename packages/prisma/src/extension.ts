import { Prisma } from "@prisma/client/extension";
import type { ShardIdentifier } from "@shardkit/id";
import type { Page } from "@shardkit/scatter";
import { type ActionOptions, type ActionUnit, type ModelKey, runAction } from "./action.js";
import { type AtomicRecoveryOption, atomicRecoveryOptions, watchAtomic } from "./atomic-auto.js";
import { type AtomicRecoveryOptions, type AtomicRecoveryReport, recoverAtomic } from "./atomic-recover.js";
import {
  backfillClaims,
  type ClaimBackfillProgress,
  type ClaimBackfillReport,
  type ClaimRepairReport,
  repairClaims,
} from "./claims/claim-repair.js";
import { type CommandOptions, runCommand } from "./command.js";
import { RoutingOptionsError, UnsupportedShardOperationError } from "./errors.js";
import { callModel, DEFAULT_TIMEOUT_MS, Executor } from "./executor.js";
import type { IdempotentOutcome } from "./idempotency.js";
import type { ModelRouting } from "./keys/keys.js";
import { type LoadOption, loadOptionsOf, registryLoad } from "./load/options.js";
import { type LoadFlushResult, LoadRecorder } from "./load/recorder.js";
import { Planner, routingConfig } from "./planner.js";
import { dataModelOf } from "./prisma-private.js";
import type { ShardClient, ShardRef, ShardRegistry } from "./registry.js";
import { own, routedClient } from "./routed-client.js";
import {
  type KeylessPolicy,
  type ScatterReadOptions,
  type ScatterReport,
  scatterOptionIssues,
} from "./scatter/options.js";
import type { ScatterPageArgs } from "./scatter/page.js";
import type { LegacyIds } from "./strategies.js";
import { type TelemetryOption, telemetryOf } from "./telemetry.js";
import { runInShardTransaction, type TransactionClient, type TransactionOptions } from "./transaction.js";

export interface ShardRoutingOptions<Client extends ShardClient> {
  registry: ShardRegistry<Client>;
  /** Key fields (and an optional `keyless` policy) per model (Prisma model names); models not listed are routed by a String `id`. */
  models?: Record<string, ModelRouting>;
  /**
   * What an operation whose arguments name no shard does when the registry has more than one
   * database: `'refuse'` (default) throws `ShardKeyRequiredError`; `'scatter'` or
   * `{ mode: 'scatter', maxShards?, requireLimit?, policy?, concurrency?, deadlineMs?, onReport? }`
   * runs keyless `findMany`, `findFirst(OrThrow)`, `count`, `aggregate` and `groupBy` on every
   * database and merges them exactly. Keyless writes are always refused. With one database every
   * keyless operation simply runs there. Per model: `models: { Wallet: { keyless } }`; per call:
   * `db.$scatter(options)`.
   */
  keyless?: KeylessPolicy;
  /**
   * Where rows whose IDs are not ShardedUUIDs (v4 UUIDs, cuids: the rows of the one database an app
   * had before sharding) live: `"0/0"`. Without it such IDs are refused (`InvalidShardedIdError`),
   * never guessed. Per model: `models.X.legacy`. The README of @shardkit/prisma has the migration path.
   */
  legacy?: LegacyIds;
  /**
   * OpenTelemetry (through `@opentelemetry/api`): a span per routed call, per scatter with a child
   * per database, per `$action`; metrics `shardkit.calls`, `shardkit.scatter.misses`,
   * `shardkit.ownership.stale_rejections`. Default: the API's global providers (a no-op until the
   * app registers an SDK). `false`: no instrumentation at all. The README's "Telemetry" says more.
   */
  telemetry?: TelemetryOption;
  /**
   * How long each statement shardkit sends on a call's behalf (a scatter leg, a claim statement, an
   * ownership check) may wait for its database, a connection and then the answer, in ms (default
   * 30,000): past it the call fails with `DatabaseTimeoutError` naming the database and its shards
   * (`ShardTimeoutError` naming the shard for a claim), which `isShardUnavailable` counts as
   * unavailable. A point call is Prisma's own statement: bound it with `withShardDeadline`.
   */
  timeoutMs?: number;
  /**
   * Load per logical shard, counted by this router: calls, writes, rows written, time in the
   * database with a latency sketch (p50/p95/p99 within 2%) and the heaviest routing keys, written
   * every `intervalMs` (default 10 s) to `shardkit."ShardLoad"` on each database holding the shards
   * (one statement per database with counts; the table is made on the first flush), and rolled up
   * there across routers now and then. Read it with `sumShardLoad`. Default on (`openShards({ load })` sets the default for its
   * registry); `false` turns it off. The README's "Load per shard" says more.
   */
  load?: LoadOption;
  /**
   * The router's own recovery of atomic actions (`$action(fn, { atomic: true })`), on by default: a
   * round of `$recoverAtomic` when its first atomic action starts, and again `everyMs` (default: the
   * lease, 10 s) after one of its atomic actions failed or left a participant uncommitted, until
   * nothing is left in doubt. No round runs while nothing happens (no idle polling). `false` turns
   * it off. docs/atomic-commit.md says what it covers and what `startAtomicRecovery` adds.
   */
  atomicRecovery?: AtomicRecoveryOption;
}

/** `db.$shardLoad()`: this router's load counting (undefined with `load: false`). */
export interface ShardLoadHandle {
  /** This router's id in the table: `host:pid:random`. */
  readonly router: string;
  /** The digest of the shard configuration its rows carry. */
  readonly config: string;
  /** Ends the window now and writes it to every database with counts (what the timer does); never rejects. */
  flush(): Promise<LoadFlushResult[]>;
  /** The counts of the window not yet flushed, per shard key. */
  current(): Map<string, { calls: number; writes: number; rowsWritten: number; dbMs: number }>;
  /** Resolves once no flush statement is in flight (one a slow database has not answered yet included). */
  idle(): Promise<void>;
}

/**
 * A Prisma client extension that routes every model operation to the shard its key names.
 *
 * ```ts
 * const db = registry.databases[0].client.$extends(shardRouting({ registry, models: { Wallet: { keys: ["id", "customerId"] } } }));
 * await db.wallet.findUnique({ where: { id } }); // runs on the database holding id's shard
 * ```
 *
 * A call is planned before it enters Prisma, then runs once through the client of the database
 * that holds its shard. Extensions added on the routed client (`db.$extends(audit)`) are added to
 * every database's client, so they apply wherever a call runs.
 * Longer than 80 lines: one closure; its hooks share the routing scope, plans and load recorder.
 */
export function shardRouting<Client extends ShardClient>(options: ShardRoutingOptions<Client>) {
  const registry = options?.registry as ShardRegistry<Client> | undefined;
  if (!registry || typeof registry.resolve !== "function" || !Array.isArray(registry.databases)) {
    throw new RoutingOptionsError(["registry: expected a ShardRegistry (from createShardRegistry)"]);
  }
  const config = routingConfig(options);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RoutingOptionsError([`timeoutMs: expected a positive number of ms, got ${String(timeoutMs)}`]);
  }
  const loadIssues: string[] = [];
  const loadOptions = loadOptionsOf(
    options.load !== undefined ? options.load : registryLoad(registry),
    "load",
    loadIssues,
  );
  if (loadIssues.length > 0) throw new RoutingOptionsError(loadIssues);
  const recovery = atomicRecoveryOptions(options.atomicRecovery);
  // Longer than 80 lines: the extension's hooks, over the one routed client they share.
  return Prisma.defineExtension((base) => {
    if (!registry.databases.some((p) => (p.client as unknown) === base)) {
      throw new RoutingOptionsError([
        "shardRouting is installed on a client that is not one of the registry's clients: install it on one of them (registry.databases[0].client), and add other extensions after it so that they apply on every database",
      ]);
    }
    const planner = new Planner(dataModelOf(base), registry, config);
    const target = base.$extends({
      name: "@shardkit/prisma",
      client: {
        /** The registry this client routes with. */
        $shardRegistry(): ShardRegistry<Client> {
          return own(this).registry as ShardRegistry<Client>;
        },
        /**
         * A view of this client whose keyless reads scatter over every database with `options`
         * (overriding the `keyless` setting and its guard for the calls made through the view):
         * `await db.$scatter({ policy: "partial", onReport }).wallet.findMany({ take: 20 })`.
         */
        $scatter<This>(this: This, scatterOptions: ScatterReadOptions = {}): This {
          const routed = own(this);
          const issues = scatterOptionIssues(scatterOptions, "$scatter(options)");
          if (issues.length > 0) throw new RoutingOptionsError(issues);
          return routedClient({ ...routed, view: { ...routed.view, scatter: scatterOptions } }) as This;
        },
        /**
         * One page of a list over every database, exact however rows come and go between pages: each
         * database returns its first `limit` rows after the cursor's position in `orderBy` (with `id`
         * as tiebreaker), and the lists are merged. `nextCursor` continues the list; it is null on
         * the last page and whenever a database did not answer (`policy: 'partial'`: `complete` is
         * false and `missingShards` names the shards whose rows are absent).
         */
        async $scatterPage<This, M extends ModelKey<This>>(
          this: This,
          model: M,
          page: ScatterPageArgs<FindManyArgsOf<This, M>["where"], FindManyArgsOf<This, M>["orderBy"]>,
          pageOptions: ScatterReadOptions = {},
        ): Promise<ScatterPage<RowOf<This, M>>> {
          const routed = own(this);
          const name = routed.executor.planner.delegates.get(model);
          if (name === undefined)
            throw new UnsupportedShardOperationError(
              `${model} is not a model delegate of this Prisma schema`,
            );
          const issues = scatterOptionIssues(pageOptions, "$scatterPage(options)");
          if (issues.length > 0) throw new RoutingOptionsError(issues);
          let report: ScatterReport | undefined;
          const options: ScatterReadOptions = {
            ...pageOptions,
            onReport: (r) => {
              report = r;
              pageOptions.onReport?.(r);
            },
          };
          const merged = (await routed.executor.page(
            routed.view,
            name,
            page as ScatterPageArgs,
            options,
          )) as Page<RowOf<This, M>>;
          const complete = report?.complete ?? true;
          return {
            rows: merged.rows,
            nextCursor: complete ? merged.nextCursor : null,
            complete,
            missingShards: report?.missingShards ?? [],
          };
        },
        /**
         * A view of this client whose reads all go to the databases themselves, never to a read
         * replica: read-your-writes right after a write. `await db.$primary().wallet.findUnique(...)`.
         */
        $primary<This>(this: This): This {
          const routed = own(this);
          return routedClient({ ...routed, view: { ...routed.view, replicas: undefined } }) as This;
        },
        /**
         * Settles the claims of fields unique across shards left pending longer than `olderThanMs`
         * (default 60 s) by a write that crashed: held when the row holds the value, else deleted.
         * Forgets claim write tokens older than `tokensOlderThanMs` (default a day). Run it from a
         * timer, as the relay runs.
         */
        $repairClaims(
          this: unknown,
          repairOptions: { olderThanMs?: number; tokensOlderThanMs?: number } = {},
        ): Promise<ClaimRepairReport> {
          const routed = own(this);
          return repairClaims(routed.executor.claimContext(routed.view), repairOptions);
        },
        /**
         * Claims the unique values (`models.X.unique`) of the existing rows of `model` (a delegate
         * name: "user"), for rows written before the claims. Conflicts are reported, not thrown.
         */
        $backfillClaims(
          this: unknown,
          model: string,
          backfillOptions: {
            batchSize?: number;
            onProgress?: (progress: ClaimBackfillProgress) => void;
          } = {},
        ): Promise<ClaimBackfillReport> {
          const routed = own(this);
          const { keys, delegates } = routed.executor.planner;
          const name = delegates.get(model) ?? model;
          const specs = keys.uniqueOf(name);
          const idField = specs[0] ? keys.uniqueSpec(specs[0].scope)?.idField : undefined;
          if (!idField) {
            return Promise.reject(
              new UnsupportedShardOperationError(
                `${model} has no fields unique across shards (models.${name}.unique)`,
              ),
            );
          }
          return backfillClaims(
            routed.executor.claimContext(routed.view),
            name,
            specs,
            idField,
            (unique, stored, ownerId) =>
              keys.claimFor(unique, stored, keys.shardOfKey(name, idField, ownerId), ownerId),
            (unique, value) => keys.claimShard(unique, value),
            backfillOptions,
          );
        },
        /**
         * This router's load counting per logical shard (`load` option): `flush()` writes the
         * window now (tests, a CLI, before a planned stop), `current()` shows it. Undefined with `load: false`.
         */
        $shardLoad(this: unknown): ShardLoadHandle | undefined {
          const load = own(this).executor.load;
          if (!load || load.options === null) return undefined;
          return {
            router: load.router,
            config: load.config,
            flush: () => load.flush(),
            current: () => load.current(),
            idle: () => load.idle(),
          };
        },
        /** The client of the database that holds the shard or ID (with the extensions added after routing; never a replica). */
        $shard(shardOrId: ShardRef): Client {
          const routed = own(this);
          return routed.view.clients[routed.registry.databaseOf(shardOrId).index] as Client;
        },
        /**
         * An interactive transaction on one shard. Inside it, routed queries (through `tx` or this
         * client) run in the transaction; a key that names another shard throws `CrossShardError`.
         */
        $transactionOn<R>(
          shardOrId: ShardRef,
          fn: (tx: TransactionClient<Client>) => Promise<R>,
          txOptions: TransactionOptions = {},
        ): Promise<R> {
          const routed = own(this);
          return runInShardTransaction(
            routed.executor,
            routed.view,
            routed.registry.resolve(shardOrId),
            txOptions,
            (tx) => fn(tx as TransactionClient<Client>),
          );
        },
        /**
         * A command, once per idempotency key, in one transaction on the shard (see `CommandOptions`):
         * `fn`'s result, or the refusal `refusal` records, answered again to every retry with the key.
         * A shard that does not answer throws `CommandUnavailableError`, saying whether the command
         * may have been applied.
         */
        $command<R>(
          shardOrId: ShardRef,
          commandOptions: CommandOptions,
          fn: (tx: TransactionClient<Client>) => Promise<R>,
        ): Promise<IdempotentOutcome<R>> {
          const routed = own(this);
          let shard: ShardIdentifier;
          try {
            shard = routed.registry.resolve(shardOrId);
          } catch (error) {
            return Promise.reject(error);
          }
          // The command's options are its transaction's too (`maxWait`, `timeout`, ..., `retries`).
          return runCommand(
            shard,
            commandOptions,
            (body) => runInShardTransaction(routed.executor, routed.view, shard, commandOptions, body),
            (tx) => fn(tx as TransactionClient<Client>),
          );
        },
        /**
         * A unit of work: `fn` stages writes on `unit`; then they run grouped by database, one
         * transaction per database. Several shards throw `CrossShardError` before anything is
         * written unless `allowCrossShard` is set (then: database order, `PartialCommitError` on failure).
         */
        $action<R>(
          fn: (unit: ActionUnit<Client>) => Promise<R> | R,
          actionOptions: ActionOptions = {},
        ): Promise<R> {
          const routed = own(this);
          return runAction(routed.executor, routed.view, fn, actionOptions);
        },
        /**
         * Concludes the atomic actions left in doubt (`$action(fn, { atomic: true })` whose
         * coordinator died or lost a database): each prepared transaction older than the lease is
         * committed when its deciding database recorded the commit, else rolled back. Safe from any
         * router, and from two at once. `{ dryRun: true }` only lists them.
         */
        $recoverAtomic(recoveryOptions: AtomicRecoveryOptions = {}): Promise<AtomicRecoveryReport> {
          const routed = own(this);
          const databases = routed.view.clients.map((client, i) => ({
            client,
            name: routed.registry.databases[i]?.name ?? `database #${i}`,
            shards: routed.executor.planner.layout.databases[i]?.shards ?? [],
          }));
          return recoverAtomic(databases, { timeoutMs: routed.executor.timeoutMs, ...recoveryOptions });
        },
      },
    });
    const telemetry = telemetryOf(options.telemetry);
    const executor = new Executor(
      planner,
      callModel,
      telemetry,
      (index) => registry.databases[index]?.name,
      timeoutMs,
    );
    if (LoadRecorder.needed(loadOptions, telemetry)) {
      const load = new LoadRecorder(
        {
          layout: planner.layout,
          databases: registry.databases,
          keysOf: (model) => planner.keys.keysOf(model),
          telemetry,
        },
        loadOptions,
      );
      executor.load = load;
      // The registry's disconnect (`openShards`' close too) flushes the last window first.
      // (A registry-like object without the hook: the timer's flushes only.)
      if (loadOptions) registry.beforeDisconnect?.add(() => load.close());
    }
    const clients = registry.databases.map((p) => p.client);
    if (recovery) {
      const databases = clients.map((client, i) => ({ client, name: registry.databases[i]!.name }));
      const watch = watchAtomic((leaseMs) => recoverAtomic(databases, { leaseMs }), recovery);
      executor.atomic = watch;
      registry.beforeDisconnect?.add(() => watch.close());
    }
    return routedClient({
      executor,
      registry: registry as ShardRegistry<ShardClient>,
      view: {
        clients,
        replicas: registry.databases.some((p) => p.replicas.length > 0)
          ? registry.databases.map((p) => p.replicas.map((r) => r.client))
          : undefined,
      },
      target,
    }) as typeof target;
  });
}

/** The arguments of `client[M].findMany`. */
type FindManyArgsOf<C, M extends keyof C> = C[M] extends { findMany(args?: infer A): unknown }
  ? NonNullable<A> & { where?: unknown; orderBy?: unknown }
  : never;
/** A row as `client[M].findMany()` returns it. */
type RowOf<C, M extends keyof C> = C[M] extends { findMany(...args: never[]): PromiseLike<(infer R)[]> }
  ? R
  : never;

/** One page of `db.$scatterPage`. */
export interface ScatterPage<Row> {
  rows: Row[];
  /** Pass it as `cursor` for the next page; null on the last page, or when the page is not complete. */
  nextCursor: string | null;
  /** True when every database answered: the page is exact. */
  complete: boolean;
  /** The logical shards whose rows are absent from the page (`policy: 'partial'`). */
  missingShards: ShardIdentifier[];
}
