// Announcing a change of records to every router: the map's version (a sequence in every database,
// `MAP_BUMP_SQL`) moved on after the change has committed, so that a router's idle tick, which looks
// at one database, learns that something changed anywhere (router-view.ts).
import type { ShardClient, ShardRegistry } from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import { mapRaw, unbounded } from "./raw.js";
import { MAP_BUMP_SQL } from "./sql.js";

/** One map's announcements: one at a time, those asked for meanwhile shared by the next. */
export class Announcer<Client extends ShardClient> {
  private running: Promise<void> | undefined;
  /** Announcements asked for, and how many of them the rounds made so far cover. */
  private asked = 0;
  private covered = 0;
  private closed = false;

  constructor(
    private readonly registry: ShardRegistry<Client>,
    /** How long each database may take to answer (ms). */
    private readonly timeoutMs: number,
  ) {}

  /**
   * Moves the map's version on in every database of the registry: one statement each, 16 at a time,
   * each within `timeoutMs`; a database that does not answer is skipped (the routers' sweeps catch
   * what they miss). Outside the deadline of the work that asks for it. Resolves once a round that
   * began after this call has been made: one asked for while a round runs is made by the next.
   */
  announce(): Promise<void> {
    const wanted = ++this.asked;
    if (!this.running) {
      const rounds = async () => {
        while (this.covered < this.asked && !this.closed) {
          const covering = this.asked;
          await scatter(
            this.registry.databases,
            (p) => this.closed || mapRaw(p).$queryRawUnsafe(MAP_BUMP_SQL),
            {
              policy: "partial",
              concurrency: 16,
              targetTimeoutMs: this.timeoutMs,
              abortable: false,
            },
          );
          this.covered = covering;
        }
      };
      this.running = unbounded(rounds).finally(() => {
        this.running = undefined;
      });
    }
    // Asked after the last round's check and before it ended: a round of its own.
    return this.running.then(() => (this.covered >= wanted || this.closed ? undefined : this.announce()));
  }

  /** No announcement starts from now on (the map is closed: its clients may be disconnected). */
  close(): void {
    this.closed = true;
  }
}
