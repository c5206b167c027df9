// What the dashboard shows, gathered: each piece (each database's probe, the ownership records, the
// outbox, the load windows, the move journal) has its own loop, each read bounded by `timeoutMs`, so
// a database that does not answer slows only its own column; a snapshot is assembled from the last
// answer of each piece every `refreshMs` and handed to the listeners.

import type { BalanceMove, MoveJournalEntry, PartitionView } from "@shardkit/ownership";
import {
  type Database,
  type LoadSum,
  type OutboxLag,
  probeDatabase,
  readOutboxLag,
  sumShardLoad,
} from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import type { OpenedConfig, RawClient } from "../config.js";
import { oneLine } from "../format.js";
import { InDoubtPiece } from "./in-doubt.js";
import { type Names, namesOf } from "./names.js";
import {
  assembleSnapshot,
  type CollectSettings,
  HISTORY,
  type Probe,
  planOf,
  seriesBucketMs,
  TOP_KEYS,
} from "./snapshot.js";

export type { CollectSettings };

import type { DashboardPlan, DashboardRun, DashboardSnapshot } from "./types.js";

/**
 * @shardkit/ownership, loaded by the first read that needs it: the load is asked for before it is
 * (loading it takes a good part of the time the database takes to sum the load).
 */
const ownership = () => import("@shardkit/ownership");

/** A plan asked for within this long of the last one is the last one (each plan scans every table). */
const PLAN_INTERVAL_MS = 15_000;

/** The dashboard's data: started once, read by the server, stopped on close. */
export class Collector {
  readonly names: Names;
  private readonly probes = new Map<Database<RawClient>, Probe>();
  private view: PartitionView<RawClient> | null = null;
  private viewError: string | null = null;
  private lag: OutboxLag[] | null = null;
  private loads = new Map<Database<RawClient>, LoadSum>();
  private loadErrors = new Map<Database<RawClient>, string>();
  private journal: MoveJournalEntry[] = [];
  private planned: { plan: DashboardPlan; moves: BalanceMove[] } | null = null;
  private planning: Promise<void> | null = null;
  private planAgain = false;
  private plannedAt = 0;
  /** Each shard's owner and epoch when the plan was made (a plan over other owners is stale). */
  private plannedOwners = new Map<string, string>();
  private seq = 0;
  private stopped = false;
  /** Atomic actions in doubt (in-doubt.ts): problems of their own. */
  private readonly inDoubt: InDoubtPiece;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly wakers = new Set<() => void>();
  private readonly listeners = new Set<(snapshot: DashboardSnapshot) => void>();
  private last: DashboardSnapshot | null = null;
  private text: string | null = null;
  /** The balance or drain started from the page. */
  run: DashboardRun | null = null;

  constructor(
    private readonly opened: OpenedConfig,
    readonly settings: CollectSettings,
  ) {
    this.names = namesOf(opened);
    this.inDoubt = new InDoubtPiece(opened.registry.databases, settings.timeoutMs, this.names);
    for (const physical of opened.registry.databases)
      this.probes.set(physical, { up: null, latencyMs: null, answeredAt: null, connections: null });
  }

  get registry() {
    return this.opened.registry;
  }

  /**
   * Starts every loop. `read` resolves once each piece was read once (answered or not); `sent` once
   * the load and the probes are on their way: each client's engine is up then (Prisma's query
   * compiler loaded), and only then do the other pieces load @shardkit/ownership, nor should the
   * caller load anything big before it (loaded beside the compiler, it would hold the load back: the
   * sum is the longest read, and each database's pool gives connections in order).
   */
  start(): { sent: Promise<void>; read: Promise<void> } {
    const load = this.loop(() => this.readLoad());
    const probes = this.registry.databases.map((physical) => this.loop(() => this.probe(physical)));
    // Up without a connection (the driver's pool connects on the first query): a database that does
    // not answer holds nothing back here; its read says so.
    const sent = Promise.all(this.registry.databases.map((d) => d.client.$connect().catch(() => {}))).then(
      () => {},
    );
    const read = sent.then(async () => {
      const rest = [
        this.loop(() => this.readView()),
        this.loop(() => this.readLag()),
        this.loop(() => this.readJournal()),
        this.loop(() => this.inDoubt.read()),
      ];
      await Promise.all([load, ...probes, ...rest]);
      // Stopped meanwhile (the dashboard could not listen): nothing is scheduled.
      if (this.stopped) return;
      this.emit();
      const tick = () => {
        if (this.stopped) return;
        this.emit();
        this.schedule(tick, this.settings.refreshMs);
      };
      this.schedule(tick, this.settings.refreshMs);
      void this.replan();
    });
    return { sent, read };
  }

  /** The last snapshot (one is made at once when none was). */
  snapshot(): DashboardSnapshot {
    return this.last ?? this.emit();
  }

  /** Calls `listener` with each snapshot from now on; returns how to stop. */
  subscribe(listener: (snapshot: DashboardSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Ends every loop (reads under way finish on their own). */
  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const wake of this.wakers) wake();
    this.listeners.clear();
  }

  /** The plan shown now, and the moves it approves. */
  get plan() {
    return this.planned;
  }

  /**
   * Makes a new balancer plan (a dry run over the window, which sizes every shard with a scan of
   * its tables). One at a time: asked for while one runs, another follows it, so the plan shown
   * is never older than the ask. Asked again within `PLAN_INTERVAL_MS` of the last (a Re-plan
   * button pressed over and over), the plan shown stands, unless `fresh` (after a run moved shards)
   * or a shard has moved since (another mover).
   */
  replan(fresh = false): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.planning) {
      this.planAgain = true;
      return this.planning;
    }
    const recent = this.planned && Date.now() - this.plannedAt < PLAN_INTERVAL_MS;
    if (!fresh && recent && this.movedSincePlan().length === 0) return Promise.resolve();
    this.planning = (async () => {
      do {
        this.planAgain = false;
        // Stamped when measured: the figures are those of this moment. The owners it is made
        // over becomes the shown plan's when it lands: meanwhile the plan shown is judged against
        // its own (a move seen while re-planning keeps it stale, never fresh).
        const at = new Date();
        this.plannedAt = at.getTime();
        const owners = this.owners();
        try {
          const { runBalance } = await ownership();
          const run = await runBalance({
            registry: this.registry,
            tables: this.settings.tables,
            dryRun: true,
            windowMs: this.settings.windowMs,
            by: this.settings.by,
            timeoutMs: this.settings.timeoutMs,
          });
          this.planned = { plan: planOf(this.names, run, at), moves: run.plan?.moves ?? [] };
        } catch (error) {
          const why = this.names.clean(oneLine(error));
          this.planned = {
            plan: {
              at: at.toISOString(),
              reason: `no plan: ${why}`,
              stale: null,
              stoppedBy: "refused",
              moves: [],
              databases: [],
              hot: [],
              skipped: [],
              problems: [why],
            },
            moves: [],
          };
        }
        this.plannedOwners = owners;
      } while (this.planAgain && !this.stopped);
      this.planning = null;
      this.emit();
    })();
    return this.planning;
  }

  /** Each shard's owner and epoch, as last read. */
  private owners(): Map<string, string> {
    return new Map((this.view?.shards ?? []).map((p) => [p.shard.key, `${p.owner?.name ?? ""}:${p.epoch}`]));
  }

  /** The shards whose owner or epoch changed since the plan shown was made (it is stale then). */
  private movedSincePlan(): string[] {
    if (!this.planned) return [];
    const now = this.owners();
    const keys = new Set([...now.keys(), ...this.plannedOwners.keys()]);
    return [...keys].filter((k) => now.get(k) !== this.plannedOwners.get(k)).sort();
  }

  /** Why the plan shown is stale, or null. */
  staleness(): string | null {
    const moved = this.movedSincePlan();
    if (moved.length === 0) return null;
    const named = moved.slice(0, 5).join(", ") + (moved.length > 5 ? ` and ${moved.length - 5} more` : "");
    return `made before ${moved.length === 1 ? "shard" : "shards"} ${named} moved: ${this.planning ? "a new plan is being made" : "Re-plan makes a new one"}`;
  }

  /** Runs `read` now and then every `refreshMs` until stopped; resolves after the first. */
  private loop(read: () => Promise<void>): Promise<void> {
    const once = async () => {
      try {
        await read();
      } catch {
        // Each read records its own failure; a loop never ends on one.
      }
    };
    const again = async () => {
      while (!this.stopped) {
        await this.pause(this.settings.refreshMs);
        if (this.stopped) return;
        await once();
      }
    };
    return once().then(() => {
      void again();
    });
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        this.wakers.delete(wake);
        resolve();
      };
      this.wakers.add(wake);
      this.schedule(wake, ms);
    });
  }

  private schedule(fn: () => void, ms: number) {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }

  /**
   * One database's probe (`probeDatabase` of @shardkit/prisma: a round trip and its connections). A
   * probe still running is waited for, never doubled; one that did not answer in time is down here.
   */
  private async probe(physical: Database<RawClient>): Promise<void> {
    const probe = this.probes.get(physical)!;
    const health = await probeDatabase(physical, { timeoutMs: this.settings.timeoutMs, connections: true });
    if (health.state !== "up") {
      probe.up = false;
      probe.error = this.names.clean(health.error ?? health.state);
      return;
    }
    probe.up = true;
    delete probe.error;
    probe.latencyMs = health.latencyMs ?? null;
    probe.answeredAt = new Date();
    probe.connections = health.connections ?? null;
  }

  private async readView(): Promise<void> {
    try {
      const { readPartitionMap } = await ownership();
      const view = await readPartitionMap(this.registry, { timeoutMs: this.settings.timeoutMs });
      // The registry routes to the shards' owners by the records (this process only): the outbox and
      // load are read where the shards are now.
      view.apply();
      this.view = view;
      this.viewError = null;
      // A plan made before a move is stale: it is made again (not while a run from the page is
      // moving shards: the run re-plans when it ends).
      const moving = this.run?.state === "running" || this.run?.state === "pausing";
      if (!moving && !this.planning && this.movedSincePlan().length > 0) void this.replan();
    } catch (error) {
      this.viewError = this.names.clean(oneLine(error));
    }
  }

  private async readLag(): Promise<void> {
    this.lag = await readOutboxLag(this.registry, { timeoutMs: this.settings.timeoutMs });
  }

  private async readLoad(): Promise<void> {
    // Summed in each database over the last `windowMs` of its clock: one row per shard.
    const { windowMs } = this.settings;
    const result = await scatter(
      this.registry.databases,
      (physical) =>
        sumShardLoad(physical.client, {
          spanMs: windowMs,
          topKeys: TOP_KEYS,
          bucketMs: seriesBucketMs(windowMs),
        }),
      { policy: "partial", targetTimeoutMs: this.settings.timeoutMs, key: (p) => p.name },
    );
    for (const outcome of result.outcomes) {
      if (outcome.status === "fulfilled") {
        this.loads.set(outcome.target, outcome.value);
        this.loadErrors.delete(outcome.target);
      } else {
        this.loadErrors.set(outcome.target, this.names.clean(oneLine(outcome.error ?? outcome.reason)));
      }
    }
  }

  private async readJournal(): Promise<void> {
    const { readMoveJournal } = await ownership();
    const journal = await readMoveJournal(this.registry, {
      timeoutMs: this.settings.timeoutMs,
      limit: HISTORY,
    });
    // A database that did not answer keeps the entries it gave last.
    const { entries, unanswered } = journal;
    const silent = new Set(unanswered.map((u) => u.database));
    const kept = this.journal.filter((e) => silent.has(e.database));
    this.journal = [...entries, ...kept];
  }

  /**
   * Assembles a snapshot from the last answer of each piece and hands it to the listeners. Figures
   * that cannot be drawn (a record no snapshot can hold) keep the last snapshot, never end the
   * dashboard.
   */
  private emit(): DashboardSnapshot {
    let snapshot: DashboardSnapshot;
    try {
      snapshot = this.assemble();
    } catch (error) {
      if (this.last) return this.last;
      throw error;
    }
    this.last = snapshot;
    this.text = null;
    for (const listener of this.listeners) listener(snapshot);
    return snapshot;
  }

  /** The last snapshot as JSON, made once however many pages listen. */
  snapshotText(): string {
    this.text ??= JSON.stringify(this.snapshot());
    return this.text;
  }

  /** Assembles a snapshot from the last answer of each piece. */
  private assemble(): DashboardSnapshot {
    const snapshot = assembleSnapshot({
      registry: this.registry,
      names: this.names,
      settings: this.settings,
      source: this.opened.source,
      seq: ++this.seq,
      probes: this.probes,
      view: this.view,
      viewError: this.viewError,
      lag: this.lag,
      loads: this.loads,
      loadErrors: this.loadErrors,
      journal: this.journal,
      plan: this.planned ? { ...this.planned.plan, stale: this.staleness() } : null,
      run: this.run,
      now: Date.now(),
    });
    snapshot.problems.push(...this.inDoubt.problems());
    return snapshot;
  }
}
