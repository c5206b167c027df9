// What the page may ask for with `--allow-actions`: run the balancer's plan it shows, pause and
// resume that run, drain a database. One run at a time; each is `runBalance` of
// `@shardkit/ownership` (its moves one after another, each `moveShard` under its lease), so a
// second mover (a `shardkit move` in a terminal, another dashboard) is refused by the shard's lease,
// and a shard moved since the plan is not moved from where it no longer is.
import type { BalanceEvent, BalanceMove, BalanceRun } from "@shardkit/ownership";
import type { Database } from "@shardkit/prisma";
import type { OpenedConfig, RawClient } from "../config.js";
import { oneLine } from "../format.js";
import type { Collector } from "./collect.js";

/** An action's answer: `status` is the HTTP status the server sends. */
export interface ActionAnswer {
  ok: boolean;
  status: number;
  message: string;
}

const refuse = (status: number, message: string): ActionAnswer => ({ ok: false, status, message });

/** The page's actions over one collector. */
export class Actions {
  private controller: AbortController | null = null;
  private running: Promise<void> | null = null;
  /** The moves of the run not made yet (what resume makes). */
  private remaining: BalanceMove[] = [];
  private drain: Database<RawClient> | undefined;

  constructor(
    private readonly opened: OpenedConfig,
    private readonly collector: Collector,
  ) {}

  /** A new plan (reads only: allowed without `--allow-actions`). */
  async plan(): Promise<ActionAnswer> {
    await this.collector.replan();
    const plan = this.collector.plan?.plan;
    return { ok: true, status: 200, message: plan ? `planned: ${plan.reason}` : "planned" };
  }

  /** Runs the plan shown, made at `planAt` (the page sends the one it shows: a newer plan is refused). */
  balance(planAt: unknown): ActionAnswer {
    const busy = this.busy();
    if (busy) return busy;
    const shown = this.collector.plan;
    if (!shown || typeof planAt !== "string" || shown.plan.at !== planAt)
      return refuse(409, "the plan changed since the page showed it: look at the new one and run it again");
    if (shown.moves.length === 0) return refuse(409, `nothing to run: ${shown.plan.reason}`);
    const stale = this.collector.staleness();
    if (stale) return refuse(409, `the plan is stale (${stale}): run the new one`);
    const moving = this.movingShards();
    const clash = shown.moves.find((m) => moving.has(m.shard));
    if (clash)
      return refuse(
        409,
        `shard ${clash.shard} is already moving: wait for that move to end, then plan again`,
      );
    this.drain = undefined;
    this.start("balance", [...shown.moves]);
    return {
      ok: true,
      status: 202,
      message: `balance started: ${shown.moves.length} move${shown.moves.length === 1 ? "" : "s"}`,
    };
  }

  /** Empties `database` (its display name): every shard moves to where the balancer puts it. */
  drainDatabase(database: unknown): ActionAnswer {
    const busy = this.busy();
    if (busy) return busy;
    const physical = typeof database === "string" ? this.collector.names.find(database) : undefined;
    if (!physical) return refuse(400, `no database ${JSON.stringify(String(database))} in the configuration`);
    const name = this.collector.names.of(physical);
    const moving = this.movingShards();
    const clash = physical.shards.find((s) => moving.has(s.key));
    if (clash)
      return refuse(409, `shard ${clash.key} of ${name} is already moving: wait for that move to end`);
    this.drain = physical;
    this.start("drain", null);
    return { ok: true, status: 202, message: `drain of ${name} started` };
  }

  /** The run stops after the move under way (moved, or undone). */
  pause(): ActionAnswer {
    const run = this.collector.run;
    if (run?.state !== "running" || !this.controller) return refuse(409, "no balance is running");
    this.controller.abort();
    this.collector.run = { ...run, state: "pausing", reason: "stops after the move under way" };
    return { ok: true, status: 202, message: "pausing: the move under way ends first" };
  }

  /**
   * Goes on with the moves a paused run had left: exactly those the page showed (`left`, their
   * shards in order), or none.
   */
  resume(left: unknown): ActionAnswer {
    const run = this.collector.run;
    if (run?.state !== "paused") return refuse(409, "no paused balance to resume");
    if (run.kind === "balance" && this.remaining.length === 0) return refuse(409, "nothing left to resume");
    const shown = Array.isArray(left) ? left : [];
    if (run.kind === "balance" && shown.join(",") !== this.remaining.map((m) => m.shard).join(","))
      return refuse(409, "the moves left are not those the page showed: look at them again");
    this.start(run.kind, run.kind === "balance" ? [...this.remaining] : null, run);
    return { ok: true, status: 202, message: "resumed" };
  }

  /** The move a run from the page is making now. */
  current(): { shard: string; from: string; to: string } | null {
    const now = this.running ? this.collector.run?.current : null;
    return now ? { shard: now.shard, from: now.from, to: now.to } : null;
  }

  /** Waits for a run under way to end (the dashboard closing). */
  async close(): Promise<void> {
    this.controller?.abort();
    await this.running;
  }

  private busy(): ActionAnswer | undefined {
    const state = this.collector.run?.state;
    if (state === "running" || state === "pausing")
      return refuse(409, "a balance is running: pause it, or wait for it to end");
    return undefined;
  }

  private movingShards(): Set<string> {
    return new Set(this.collector.snapshot().moves.map((m) => m.shard));
  }

  private start(
    kind: "balance" | "drain",
    moves: BalanceMove[] | null,
    resumed?: NonNullable<Collector["run"]>,
  ) {
    const { collector } = this;
    const controller = new AbortController();
    this.controller = controller;
    this.remaining = moves ?? [];
    const done = resumed?.done ?? 0;
    collector.run = {
      kind,
      ...(this.drain ? { database: collector.names.of(this.drain) } : {}),
      state: "running",
      startedAt: resumed?.startedAt ?? new Date().toISOString(),
      done,
      total: done + (moves?.length ?? 0),
      current: null,
      reason: null,
      left: this.leftShown(),
    };
    const settings = collector.settings;
    const onEvent = (event: BalanceEvent) => {
      const run = collector.run!;
      if (event.type === "measured" && moves === null)
        collector.run = { ...run, total: done + event.plan.moves.length };
      else if (event.type === "move")
        collector.run = {
          ...run,
          current: {
            shard: event.shard,
            from: this.collector.names.show(event.from),
            to: this.collector.names.show(event.to),
            step: "precheck",
          },
        };
      else if (event.type === "step" && run.current)
        collector.run = { ...run, current: { ...run.current, step: event.progress.step } };
      else if (event.type === "moved") {
        this.remaining = this.remaining.filter((m) => m.shard !== event.shard);
        collector.run = { ...run, done: run.done + 1, current: null, left: this.leftShown() };
      } else if (event.type === "pause") collector.run = { ...run, reason: collector.names.clean(event.why) };
    };
    this.running = (async () => {
      let report: BalanceRun | undefined;
      let failure: string | undefined;
      try {
        const { runBalance } = await import("@shardkit/ownership");
        report = await runBalance({
          registry: this.opened.registry,
          tables: settings.tables,
          ...(this.drain ? { drain: this.drain } : {}),
          ...(moves ? { moves } : {}),
          windowMs: settings.windowMs,
          by: settings.by,
          timeoutMs: settings.timeoutMs,
          mode: settings.mode,
          sourceConnection: (source) => this.opened.urlOf(source),
          signal: controller.signal,
          onEvent,
        });
      } catch (error) {
        failure = collector.names.clean(oneLine(error));
      }
      const run = collector.run!;
      const reason = failure ?? collector.names.clean(report!.reason);
      const paused = report?.stoppedBy === "interrupted";
      collector.run = {
        ...run,
        current: null,
        state: paused ? "paused" : failure || !report!.ok ? "failed" : "done",
        reason,
      };
      this.controller = null;
      this.running = null;
      // Shards moved: the plan shown is made again (not when the dashboard is closing).
      await collector.replan(true);
    })();
  }

  /** The moves left, as the page shows them. */
  private leftShown(): { shard: string; from: string; to: string }[] {
    return this.remaining.map((m) => ({
      shard: m.shard,
      from: this.collector.names.show(m.from),
      to: this.collector.names.show(m.to),
    }));
  }
}
