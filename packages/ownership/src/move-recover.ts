// What a move leaves when it fails or is found stopped, and how it is finished or undone: a move
// taken over from a mover that stopped is finished when its source recorded the switch, else undone
// (`resume`); a move that fails says what it left and what a rerun does (`failed`), undoing itself
// when it can before the switch, and taking its move back to undo it when it lost its lease and
// nobody holds it (`undoStopped`). Every undo reads what the databases record (`undo`).
import type { ShardIdentifier } from "@shardkit/id";
import type { ShardClient } from "@shardkit/prisma";
import {
  EpochConflictError,
  MoveFailedError,
  MoveInProgressError,
  MoveLeaseLostError,
  MoveTimeoutError,
  MoveVerifyError,
} from "./errors.js";
import { completeSwitch } from "./heal.js";
import type { ShardLease } from "./lease.js";
import type { PartitionMap } from "./map.js";
import { lastLine, raw } from "./raw.js";
import { teardown } from "./replication.js";
import type { MoveStep } from "./steps.js";

/**
 * Finishes or undoes a move taken over from a mover that stopped (`held`): finished when its source
 * recorded the switch (its tombstone of this attempt; or, for a move of an earlier version, when
 * the target owns the shard), undone otherwise.
 */
export async function resume<Client extends ShardClient>(
  map: PartitionMap<Client>,
  held: ShardLease<Client>,
  cleanup: boolean,
  /** How long its teardown waits for a statement it cancels or a slot in use (`copyTimeoutMs`). */
  waitMs: number,
): Promise<"rolled-forward" | "rolled-back"> {
  let switched: boolean | undefined;
  try {
    return await resumeAs(map, held, { cleanup, waitMs }, (decided) => {
      switched = decided;
    });
  } catch (error) {
    if (error instanceof MoveLeaseLostError || held.isLost || switched === undefined) {
      await held.lapse();
      throw new MoveFailedError(
        held.shard,
        {
          step: "resume",
          left: held.isLost ? "taken-over" : "half-done",
          rerun: held.isLost ? null : "undo",
          what: held.isLost
            ? "Another mover (or a router) holds the stopped move now, and finishes or undoes it."
            : `The stopped move of ${held.from.name} to ${held.to.name} could not be read. Run the move again.`,
        },
        { cause: error },
      );
    }
    await held.lapse();
    throw new MoveFailedError(
      held.shard,
      {
        step: "resume",
        left: "half-done",
        rerun: switched ? "finish" : "undo",
        what: switched
          ? `The stopped move had switched: ${held.to.name} owns the shard (or does as soon as it answers). Run the move again to finish it (replication teardown, cleanup of the old copy at ${held.from.name}).`
          : `The stopped move had not switched: ${held.from.name} owns the shard. Run the move again to undo what is left of it (the copy at ${held.to.name}, its replication objects).`,
      },
      { cause: error },
    );
  }
}

/** `resume`'s work: `decided` hears, once the facts are read, whether the stopped move had switched. */
async function resumeAs<Client extends ShardClient>(
  map: PartitionMap<Client>,
  held: ShardLease<Client>,
  { cleanup, waitMs }: { cleanup: boolean; waitMs: number },
  decided: (switched: boolean) => void,
): Promise<"rolled-forward" | "rolled-back"> {
  const [own] = await raw(held.from).$queryRawUnsafe<
    { state: string; epoch: number; attempt: string | null }[]
  >(`SELECT state, epoch, attempt FROM "ShardOwnership" WHERE shard = $1`, held.shard.bits);
  const [target] = await raw(held.to).$queryRawUnsafe<{ state: string; epoch: number }[]>(
    `SELECT state, epoch FROM "ShardOwnership" WHERE shard = $1`,
    held.shard.bits,
  );
  const switched = own?.state === "moved" && own.attempt === (held.attempt === "" ? null : held.attempt);
  const targetOwns = target?.state === "owned" && own !== undefined && target.epoch > own.epoch;
  decided(switched || targetOwns);
  if (!switched && !targetOwns) {
    await undo(held, waitMs);
    return "rolled-back";
  }
  if (switched) await completeSwitch(map, held.to, held.shard, held.attempt, own!.epoch);
  else await held.entomb(target!.epoch); // an earlier version's switch: the source's tombstone
  await teardown(held.from, held.to, held.shard, waitMs);
  await held.tidy();
  if (cleanup) await held.cleanup();
  await held.release();
  return "rolled-forward";
}

/**
 * Undoes a move that did not switch: the source takes the shard's writes again, replication is torn
 * down, the target's copy discarded, both fences tidied, and the move's record released.
 */
async function undo<Client extends ShardClient>(held: ShardLease<Client>, waitMs: number): Promise<void> {
  await held.unfence();
  await teardown(held.from, held.to, held.shard, waitMs);
  await held.discard();
  await held.tidy();
  await held.release();
}

/**
 * What a move that failed at `step` left, as an error that says it and what a rerun does. Before
 * the switch it undoes the move when it can (then nothing of it is left); when it cannot, it gives
 * its lease up at once, so routers give a fenced shard back to its owner at their next refused write.
 * Longer than 80 lines: each way a failed move ends (undone, left, finished), decided together.
 */
export async function failed<Client extends ShardClient>(
  held: ShardLease<Client>,
  shard: ShardIdentifier,
  step: MoveStep,
  error: unknown,
  decided: boolean,
  /** How long its teardown waits for a statement it cancels or a slot in use (`copyTimeoutMs`). */
  waitMs: number,
): Promise<unknown> {
  const { from, to } = held;
  const takenOver = (cause: unknown) =>
    new MoveFailedError(
      shard,
      {
        step,
        left: "taken-over",
        rerun: null,
        what: "This mover lost its lease and changed nothing after that: the move is another mover's now (or a router gave the fenced shard back to its owner), which finishes or undoes it.",
      },
      { cause },
    );
  const lost = (e: unknown) => e instanceof MoveLeaseLostError || held.isLost;
  /** What this attempt made and its taker has not torn down yet (a subscription created just before the lease was found lost): dropped, by this attempt's names only. */
  const dropOwn = () => teardown(from, to, shard, waitMs, held.names.subscription).catch(() => {});
  if (!decided) {
    if (!lost(error)) {
      try {
        await undo(held, waitMs);
        // A mismatched copy or a copy that took too long says so itself ("the move was undone").
        if (error instanceof MoveVerifyError) return error;
        if (error instanceof MoveTimeoutError)
          return new MoveTimeoutError(shard, error.what, error.timeoutMs, { undone: true, cause: error });
        return new MoveFailedError(
          shard,
          {
            step,
            left: "undone",
            rerun: null,
            what: `It was undone: ${from.name} owns the shard and takes its writes, and nothing of the move is left. Run it again to move the shard.`,
          },
          { cause: error },
        );
      } catch (undoError) {
        if (!lost(undoError)) {
          await held.lapse();
          return new MoveFailedError(
            shard,
            {
              step,
              left: "half-done",
              rerun: "undo",
              what: `It could not be undone now (${lastLine(undoError)}). Its lease was given up, so if the shard is fenced, the next refused write of a router gives it back to ${from.name}. Run the same move again to undo what is left (the target's copy, replication objects holding WAL on ${from.name}) and move the shard.`,
            },
            { cause: error },
          );
        }
        // It lost its lease before or during the undo: below.
      }
    }
    // Before the switch, a move nobody holds any more (its lease lapsed, or a router gave the
    // fence back) is taken back and undone; one another mover holds is theirs.
    await dropOwn();
    return undoStopped(held, shard, step, error, { takenOver, waitMs });
  }
  if (lost(error)) {
    await dropOwn();
    return takenOver(error);
  }
  await held.lapse();
  const owner = await raw(to)
    .$queryRawUnsafe<{ state: string; epoch: number }[]>(
      `SELECT state, epoch FROM "ShardOwnership" WHERE shard = $1`,
      shard.bits,
    )
    .then((r) => r[0])
    .catch(() => undefined);
  const where =
    owner?.state === "owned"
      ? `${to.name} owns the shard (epoch ${owner.epoch}) and takes its writes`
      : `the switch to ${to.name} may have been decided at ${from.name}: if so, ${to.name} takes the shard's writes as soon as it answers (a router refused there completes the switch)`;
  return new MoveFailedError(
    shard,
    {
      step,
      left: "half-done",
      rerun: "finish",
      what: `${where}. Run the same move again to finish it (replication teardown, cleanup of the old copy at ${from.name}).`,
    },
    { cause: error },
  );
}

/**
 * This mover lost its lease before the switch, and nobody else holds the move (its lease lapsed: a
 * slow or stuck mover; or a router gave its fenced shard back to its owner): the target's copy and
 * the replication objects would stay until a rerun. It takes the move back and undoes it. When
 * another mover holds it, the move is theirs.
 */
async function undoStopped<Client extends ShardClient>(
  held: ShardLease<Client>,
  shard: ShardIdentifier,
  step: MoveStep,
  error: unknown,
  { takenOver, waitMs }: { takenOver: (cause: unknown) => MoveFailedError; waitMs: number },
): Promise<MoveFailedError> {
  const { from, to } = held;
  let again: { lease: ShardLease<Client>; givenBack: boolean } | undefined;
  try {
    again = await held.retake();
  } catch (retakeError) {
    if (retakeError instanceof MoveInProgressError || retakeError instanceof EpochConflictError)
      return takenOver(error);
    return halfDone(retakeError);
  }
  const why = again.givenBack
    ? `This mover's lease lapsed inside its fence and a router gave the shard back to ${from.name}`
    : "This mover's lease lapsed (it was too slow)";
  function halfDone(cause: unknown) {
    return new MoveFailedError(
      shard,
      {
        step,
        left: "half-done",
        rerun: "undo",
        what: `This mover lost its lease before the switch: ${from.name} owns the shard (routers give a fence whose lease lapsed back to it); what is left of the move (the copy at ${to.name}, replication objects holding WAL on ${from.name}) could not be undone now (${lastLine(cause)}). Run the same move again to undo it and move the shard.`,
      },
      { cause: error },
    );
  }
  again.lease.start();
  try {
    await undo(again.lease, waitMs);
    return new MoveFailedError(
      shard,
      {
        step,
        left: "undone",
        rerun: null,
        what: `${why}; the move was then undone: ${from.name} owns the shard and takes its writes, and nothing of the move is left. Run it again to move the shard (a longer --lease or --max-freeze, or a less busy host).`,
      },
      { cause: error },
    );
  } catch (undoError) {
    if (again.lease.isLost) return takenOver(error); // another mover took it meanwhile: theirs
    await again.lease.lapse();
    return halfDone(undoError);
  } finally {
    again.lease.stop();
  }
}
