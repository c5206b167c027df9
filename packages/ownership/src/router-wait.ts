// What a router does with a call to a shard between owners: before the call, a shard whose calls
// routing refuses is refused and a write to a fenced shard waits in the router (`admit`); after a
// database refused it, the router repairs what it can and reads the map again (`settle`). Waiting
// writes share one poll of the databases concerned (`hold`, `poll`), and run once their shard is
// switched or given back, or fail when their time is up.
import { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { type Refusal, StaleOwnerError } from "./errors.js";
import type { RouterRepairs } from "./heal.js";
import type { RouterView } from "./router-view.js";

/** A write waiting in the router for its fenced shard's placement to change. */
interface Waiter<Client extends ShardClient> {
  shard: ShardIdentifier;
  physical: Database<Client>;
  epoch: number;
  deadline: number;
  /** Waiting for a fenced shard: woken when it is no longer fenced too, and failed when its time is up. */
  fenced: boolean;
  wake(error?: unknown): void;
}

/** The waits of one router's calls for shards between owners. */
export class RouterWaits<Client extends ShardClient> {
  /** Writes waiting for their fenced shard's placement to change (see `hold`). */
  private readonly waiting = new Set<Waiter<Client>>();
  private polling = false;

  constructor(
    private readonly registry: ShardRegistry<Client>,
    private readonly view: RouterView<Client>,
    private readonly repairs: RouterRepairs<Client>,
    /** The map's shared read of every database (`PartitionMap.refresh`). */
    private readonly refresh: () => Promise<void>,
    private readonly timing: { waitMs: number; recheckMs: number },
  ) {}

  /**
   * After a refusal of a call for `refusal.shard`: gives a fence whose mover stopped back to its
   * owner, or completes a decided switch, then reads the map. When routing would still send the shard
   * where it was refused and it is fenced there (between owners), the call waits in the router
   * (`hold`) instead of being sent there again. A shard whose records cannot be right fails with its
   * typed error at once.
   */
  async settle(refusal: Refusal): Promise<void> {
    const { shard } = refusal;
    const physical = this.registry.databaseOf(shard);
    const epoch = this.registry.epochOf(shard);
    if (refusal.state === "fenced" && refusal.move?.lapsed && refusal.move.step !== "switched")
      await this.repairs.giveBack(physical, shard);
    await this.refresh();
    if (
      refusal.state === "incoming" &&
      (await this.repairs.complete(physical, shard, refusal.attempt, this.view).catch(() => false))
    ) {
      await this.refresh();
      return; // the target owns it now: run again there
    }
    this.view.refuseProblem(shard);
    if (this.registry.databaseOf(shard) !== physical || this.registry.epochOf(shard) !== epoch) return;
    if (this.view.fenced.has(shard.bits)) return this.hold(shard);
    // Refused, yet the map read says nothing changed (a record changed between the refusal and the
    // read, or a database that did not answer): one short wait for the map to catch up.
    await this.hold(shard, Math.min(this.timing.waitMs, 250), false);
  }

  /**
   * Before a call to `shard`: nothing for a shard with no problem (the usual case: two set lookups).
   * A shard whose calls routing refuses: the map is read again (at most once per
   * `recheckMs`, shared by every such call) and the call refused if the problem is still
   * there. A write to a shard the router knows is fenced: it waits in the router (`hold`).
   */
  admit(shard: ShardIdentifier, call: { write: boolean }): Promise<void> | undefined {
    if (this.view.problems.has(shard.bits))
      return (async () => {
        if (performance.now() - this.view.lastRead >= this.timing.recheckMs)
          await this.refresh().catch(() => {});
        this.view.refuseProblem(shard);
      })();
    if (call.write && this.view.fenced.has(shard.bits)) return this.hold(shard);
    return undefined;
  }

  /**
   * Waits, in the router, until `shard`'s placement changes (switched: it runs at the new owner), it
   * is no longer fenced (given back), or `ms` (default `waitMs`) have passed: then, when `fail`, it
   * fails with `StaleOwnerError`. Every waiting call shares one poll of the databases concerned (the
   * owner and where the shard moves to), every 10 ms at first and less often as the wait grows. A
   * fence whose move's lease lapsed meanwhile is given back to its owner by the poll. With
   * `fenced: false` (a refusal the map does not explain yet), it waits only for a change of
   * placement, or `ms`, and then runs again.
   */
  private hold(shard: ShardIdentifier, ms = this.timing.waitMs, fenced = true): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter<Client> = {
        shard,
        physical: this.registry.databaseOf(shard),
        epoch: this.registry.epochOf(shard),
        deadline: performance.now() + ms,
        fenced,
        wake: (error?: unknown) => {
          this.waiting.delete(waiter);
          if (error && fenced) reject(error);
          else resolve();
        },
      };
      this.waiting.add(waiter);
      void this.poll();
    });
  }

  /**
   * Reads, while calls wait, the databases concerned (each waiting shard's owner and where it moves
   * to), every 10 ms at first and up to every 100 ms as the oldest wait grows, and wakes the calls
   * whose shard's placement changed, is no longer fenced, or whose time is up. A fence whose move's
   * lease lapsed is given back to its owner first.
   */
  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    const { registry, view } = this;
    try {
      for (let round = 0; this.waiting.size > 0; round++) {
        await new Promise((r) => setTimeout(r, Math.min(100, 10 + round * 2)));
        const concerned = new Set<Database<Client>>();
        for (const w of this.waiting) {
          concerned.add(w.physical);
          const peer = view.rowOf(w.physical, w.shard)?.peer;
          const to = peer ? registry.databases.find((p) => view.identities.get(p) === peer) : undefined;
          if (to) concerned.add(to);
        }
        await view.read([...concerned]).catch(() => {});
        const now = performance.now();
        const lapsed = new Map<number, Database<Client>>();
        const decided = new Map<number, { to: Database<Client>; attempt: string }>();
        for (const w of this.waiting) {
          const row = view.rowOf(w.physical, w.shard);
          const placed =
            registry.databaseOf(w.shard) !== w.physical ||
            registry.epochOf(w.shard) !== w.epoch ||
            view.problems.has(w.shard.bits);
          // The switch is decided at the old owner (its tombstone places the shard at the new one)
          // and the new owner holds it incoming still (its mover is between the two commits, or
          // stopped there): the call waits until the new owner takes it, completed by this router,
          // rather than be refused there.
          const to = registry.databaseOf(w.shard);
          const incoming = view.rowOf(to, w.shard);
          if (
            incoming?.state === "incoming" &&
            incoming.attempt &&
            !view.problems.has(w.shard.bits) &&
            now <= w.deadline
          ) {
            decided.set(w.shard.bits, { to, attempt: incoming.attempt });
          } else if (placed || (w.fenced && row?.state !== "fenced")) {
            w.wake();
          } else if (now > w.deadline) {
            w.wake(
              new StaleOwnerError({
                shard: w.shard,
                epoch: row?.epoch ?? 0,
                state: row?.state ?? "unknown",
                peer: row?.peer ?? null,
                attempt: row?.attempt ?? null,
                move: null,
              }),
            );
          } else if (row?.state === "fenced" && row.lapsed) {
            lapsed.set(w.shard.bits, w.physical);
          }
        }
        // A fence whose move's lease lapsed: given back once per shard, not once per waiting write,
        // and without holding up the wake-ups of the others.
        for (const [bits, physical] of lapsed)
          void this.repairs.giveBack(physical, ShardIdentifier.fromBits(bits));
        for (const [bits, { to, attempt }] of decided)
          void this.repairs.once(`complete ${bits}`, () =>
            this.repairs.complete(to, ShardIdentifier.fromBits(bits), attempt, view),
          );
      }
    } finally {
      this.polling = false;
    }
  }
}
