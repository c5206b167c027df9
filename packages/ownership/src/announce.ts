// Announcing a change of records to every router: the map's version (a sequence in every database,
// `MAP_BUMP_SQL`) moved on after the change has committed, so that a router's idle tick, which looks
// at one database, learns that something changed anywhere (router-view.ts).
import type { ShardClient, ShardRegistry } from "@shardkit/prisma";
import { scatter } from "@shardkit/scatter";
import { raw, unbounded } from "./raw.js";
import { MAP_BUMP_SQL } from "./sql.js";

/** One map's announcements: one at a time, those asked for meanwhile shared by the next. */
export class Announcer<Client extends ShardClient> {
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(
    private readonly registry: ShardRegistry<Client>,
    /** How long each database may take to answer (ms). */
    private readonly timeoutMs: number,
  ) {}

  /**
   * Moves the map's version on in every database of the registry: one statement each, 16 at a time,
   * each within `timeoutMs`; a database that does not answer is skipped (the routers' sweeps catch
   * what they miss). Outside the deadline of the work that asks for it. Resolves once the
   * announcements asked for so far are made.
   */
  announce(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    const run = async () => {
      do {
        this.again = false;
        await scatter(this.registry.databases, (p) => this.closed || raw(p).$queryRawUnsafe(MAP_BUMP_SQL), {
          policy: "partial",
          concurrency: 16,
          targetTimeoutMs: this.timeoutMs,
          abortable: false,
        });
      } while (this.again && !this.closed);
    };
    this.running = unbounded(run).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** No announcement starts from now on (the map is closed: its clients may be disconnected). */
  close(): void {
    this.closed = true;
  }
}
