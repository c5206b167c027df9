// Who rolls up: each router, after a flush to a database that answered, now and then (never two of
// its own at once there); the database lets one rollup run at a time (the rollup function's lock).
import { DEFAULT_TOP_KEYS } from "./options.js";
import { ROLL_UP } from "./rollup.js";
import { CREATE_LOAD_TABLE } from "./schema.js";

/** A router tries a rollup on a database at most this often. */
export const ROLLUP_EVERY_MS = 10_000;

type Raw = { $executeRawUnsafe(sql: string, ...values: unknown[]): PromiseLike<unknown> };

/** One router's rollups on one database. */
export class Roller {
  private last = Number.NEGATIVE_INFINITY;
  private running: Promise<void> | undefined;
  private setUp = false;

  constructor(
    private readonly client: Raw,
    private readonly retainMs: number,
    private readonly topKeys: number,
  ) {}

  /** `database`'s in `rollers`, made on first use: a day of history kept at least, whatever `retainMs`. */
  static of(
    rollers: (Roller | undefined)[],
    database: number,
    client: Raw,
    options: { retainMs: number; topKeys: number },
  ): Roller {
    rollers[database] ??= new Roller(
      client,
      Math.max(options.retainMs, 86_400_000),
      Math.max(options.topKeys, DEFAULT_TOP_KEYS),
    );
    return rollers[database];
  }

  /**
   * Starts a rollup unless one ran less than `ROLLUP_EVERY_MS` ago (by `now`) or is running. A
   * database whose set-up is of an earlier version (no rollup function, the old primary key) gets
   * this version's first, once. Never rejects: a failed rollup is tried again later, and the windows
   * it would have moved wait in the table, counted there.
   */
  after(now: number): void {
    if (this.running || now - this.last < ROLLUP_EVERY_MS) return;
    this.last = now;
    const run = async () => {
      try {
        await this.client.$executeRawUnsafe(ROLL_UP, this.retainMs, this.topKeys);
      } catch {
        if (this.setUp) return;
        this.setUp = true;
        for (const ddl of CREATE_LOAD_TABLE) await this.client.$executeRawUnsafe(ddl);
        await this.client.$executeRawUnsafe(ROLL_UP, this.retainMs, this.topKeys);
      }
    };
    this.running = run().then(
      () => {},
      () => {},
    );
    void this.running.then(() => {
      this.running = undefined;
    });
  }

  /** Resolves once no rollup of this router is running here. */
  idle(): Promise<void> {
    return this.running ?? Promise.resolve();
  }
}
