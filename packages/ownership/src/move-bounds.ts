// A move's bounds: the deadline its database statements meet, phase by phase (`MoveClock`), and the
// databases it must have heard from before it starts (`needAnswers`): a slow answer is never taken
// for an absent one, and a database that does not answer in time stops the move with an error naming it.
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { DatabasesUnansweredError, MoveTimeoutError } from "./errors.js";
import type { PartitionMap } from "./map.js";

/**
 * The deadline a move's database statements must meet (`bounded`), set phase by phase. The copy and
 * the freeze promise a total (`copyTimeoutMs` from the copy's start, `freezeBudgetMs` from the
 * fence): every statement must have answered by then. The other phases (checks, preparation, the
 * switch and teardown and cleanup, an undo, a resume) are many short statements, some of them
 * batches of a long whole: each statement gets `copyTimeoutMs` of its own. A database that does not
 * answer in time fails the phase with `MoveTimeoutError` naming it, and the move is undone, or says
 * what it left, as for any failure.
 */
export class MoveClock {
  private what = "";
  private budgetMs = 0;
  /** The phase's end for a total (none before the first phase); undefined: per statement. */
  private end: number | undefined = Number.POSITIVE_INFINITY;

  constructor(private readonly shard: ShardIdentifier) {}

  get at(): number {
    return this.end ?? performance.now() + this.budgetMs;
  }

  /**
   * From now on the move's statements must each answer within `budgetMs`, or, with `total`, all
   * by `total.from + budgetMs`: `what` is what a late one did not finish.
   */
  phase(what: string, budgetMs: number, options: { total?: { from: number } } = {}): void {
    this.what = what;
    this.budgetMs = budgetMs;
    this.end = options.total ? options.total.from + budgetMs : undefined;
  }

  late(database: string): MoveTimeoutError {
    return new MoveTimeoutError(this.shard, `${this.what} (waiting for ${database})`, this.budgetMs);
  }
}

/**
 * Stops a move whose databases it needs did not answer the read of the map or of the move records
 * (a slow answer is not an absent one): the source, the target, and every database that records
 * anything of the shard or was never read (it might).
 */
export function needAnswers<Client extends ShardClient>(
  map: PartitionMap<Client>,
  shard: ShardIdentifier,
  to: Database<Client>,
  unansweredMoves: readonly { physical: Database<Client>; error: string }[],
): void {
  const silent = new Map<Database<Client>, string>();
  for (const [physical, error] of map.unanswered()) silent.set(physical, error);
  for (const { physical, error } of unansweredMoves) if (!silent.has(physical)) silent.set(physical, error);
  const from = map.registry.databaseOf(shard);
  const needed = [...silent].filter(
    ([physical]) => physical === from || physical === to || map.mayRecord(physical, shard),
  );
  if (needed.length > 0)
    throw new DatabasesUnansweredError(
      `shard ${shard.key} cannot move: databases it needs did not answer within ${map.timeoutMs} ms (nothing was changed)`,
      needed.map(([physical, error]) => ({ database: physical.name, error })),
    );
}
