// A move as data: the steps a mover runs under its lease, in order, one table per mode. The runner
// (move.ts) reports each step as it starts and as it ends, and calls `afterStep`; `moveSteps`, the
// progress bar's total and the crash tests (a mover killed after each step) read the same tables.
//
// A step has no undo of its own. A failure before the switch is undone by one idempotent undo that
// reads what the databases record (the fence, the copy, the replication objects, the move's record),
// so that it also serves a move taken over from a mover that died, which remembers nothing; a
// failure after the switch is finished, never undone (`decides` marks the step that decides).
import type { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient } from "@shardkit/prisma";
import { preparedNaming } from "@shardkit/prisma/internal";
import { countAt } from "./check.js";
import { MoveTimeoutError, MoveVerifyError } from "./errors.js";
import type { ShardLease } from "./lease.js";
import type { PartitionMap } from "./map.js";
import { bounded, type Raw, raw } from "./raw.js";
import {
  copied,
  lagBytes,
  publish,
  reached,
  slotWaits,
  subscribe,
  teardown,
  walPosition,
} from "./replication.js";
import { shardOfRowSql } from "./sql.js";
import { type Check, type CopyToCheck, checkAll, checkChanged, checkUnchanged } from "./verify.js";

/** The steps of a move, in order, as progress reports them. */
export type MoveStep =
  | "resume"
  | "precheck"
  | "lease"
  | "receive"
  | "publish"
  | "subscribe"
  | "copy"
  | "catch-up"
  | "verify"
  | "fence"
  | "final-position"
  | "verify-changes"
  | "switch"
  | "teardown"
  | "cleanup"
  | "done";

export interface MoveProgress {
  step: MoveStep;
  /** Rows of the shard at the target so far (copy), per table summed; rows compared (verify, verify-changes). */
  rows?: number;
  /** Bytes of WAL the target is behind the source (catch-up, final-position). */
  lagBytes?: number;
  /** ms since the move started. */
  elapsedMs: number;
}

/** What the steps of one move share: its settings, its lease, and what earlier steps found. */
export interface MoveRun<Client extends ShardClient> {
  map: PartitionMap<Client>;
  shard: ShardIdentifier;
  from: Database<Client>;
  to: Database<Client>;
  held: ShardLease<Client>;
  /** Compare checksums besides counts (`verify`). */
  sums: boolean;
  sourceConnection: string | undefined;
  maxLagBytes: number;
  copyTimeoutMs: number;
  /** Sets the deadline of the statements from now on (the move's clock). */
  phase(what: string, budgetMs: number, options?: { total?: { from: number } }): void;
  /** Reports progress within the running step (rows copied, bytes behind). */
  progress(extra: Omit<MoveProgress, "step" | "elapsedMs">): void;
  /**
   * Starts the copy's clock: from now on the statements must all have answered within
   * `copyTimeoutMs`, and `copyTimeout` throws once it is up.
   */
  startCopy(): void;
  /** Throws MoveTimeoutError once the copy's time is up (never before `startCopy`). */
  copyTimeout(what: string): void;
  /** Throws MoveTimeoutError once writes have waited longer than the freeze budget. */
  freezeTimeout(what: string): void;
  /** Rows per table at the fence, as checked at the target. */
  rows: Record<string, number>;
  /** When writes started to wait (the fence), `performance.now()`. */
  freezeStarted: number;
  changedRows: number;
  /** The shard's epoch at its new owner, once switched. */
  epoch: number;
  /** How long writes waited, fence to switch (ms). */
  freezeMs: number;
  /** The switch was attempted: a failure from here is finished, never undone. */
  decided: boolean;
}

export interface Step {
  name: MoveStep;
  /**
   * The step that decides the move (the switch). Before it runs, the runner checks that writes have
   * not waited longer than the freeze budget and records the verified copy; from its start, a
   * failure is finished, not undone.
   */
  decides?: true;
  run<Client extends ShardClient>(move: MoveRun<Client>): Promise<void>;
}

/**
 * Armed: the shard's writes at the source check its record (and note their rows' keys) from now on,
 * so the fence is one row update, with no DDL waiting for the writers of every table. The target
 * fences the incoming shard.
 */
const receive: Step = {
  name: "receive",
  async run({ held }) {
    await held.arm();
    await held.receive();
  },
};

/** Writes wait from here: the source refuses the shard's writes until the switch (or the undo). */
const fence: Step = {
  name: "fence",
  async run(move) {
    // Writes are held from the fence: never for a copy whose time is up already.
    move.copyTimeout("the copy's check");
    move.freezeStarted = performance.now();
    move.phase("the freeze", move.held.freezeBudget, { total: { from: move.freezeStarted } });
    await move.held.fence();
    // An atomic action prepared at the source before the fence commits its rows there when it is
    // concluded: the shard never switches before that (within the freeze budget, else undone).
    await waitFor(
      move,
      async () => (await preparedNaming(move.from.client, move.shard.bits)).length === 0,
      () => move.freezeTimeout("atomic actions prepared on the shard at the source (inside the fence)"),
      2,
      50,
    );
  },
};

const switchOwner: Step = {
  name: "switch",
  decides: true,
  async run(move) {
    move.phase("the switch, teardown and cleanup", move.copyTimeoutMs);
    move.decided = true;
    const switched = await move.held.switch();
    move.epoch = switched.epoch;
    move.freezeMs = Math.round(switched.ownedAt - move.freezeStarted);
  },
};

const teardownStep: Step = {
  name: "teardown",
  async run({ from, to, shard, held, copyTimeoutMs }) {
    await teardown(from, to, shard, copyTimeoutMs);
    await held.tidy();
  },
};

/** The old copy at the source, deleted in batches (the tombstone stays). */
const cleanup: Step = {
  name: "cleanup",
  async run({ held }) {
    await held.cleanup();
  },
};

/** A live move (PostgreSQL logical replication): writes wait only from the fence to the switch. */
const LIVE: readonly Step[] = [
  receive,
  {
    name: "publish",
    async run(move) {
      const { held, map, shard } = move;
      // The copy's budget is a total, from here to the fence (its check there).
      move.startCopy();
      await held.atSource((tx) => publish(tx, map.tables, shard, held.names.publication));
    },
  },
  {
    name: "subscribe",
    async run(move) {
      const { held, from, to, sourceConnection } = move;
      const { publication, subscription } = held.names;
      await slotsNamed(move, () => subscribe(from, to, subscription, sourceConnection!, publication));
      await held.renew(); // a mover that lost its lease meanwhile drops what it just made, in `failed`
    },
  },
  {
    name: "copy",
    async run(move) {
      await slotsNamed(move, () =>
        waitFor(
          move,
          () => copied(move.to, move.held.names.subscription),
          () => move.copyTimeout("the initial copy"),
          50,
          50,
        ),
      );
      move.progress({ rows: await countAt(move.map.tables, move.to, move.shard) });
    },
  },
  {
    name: "catch-up",
    async run(move) {
      await waitFor(
        move,
        async () => {
          const lag = await lagBytes(move.from, move.held.names.subscription);
          move.progress({ lagBytes: lag });
          return lag <= move.maxLagBytes;
        },
        () => move.copyTimeout("catching up"),
        50,
        50,
      );
    },
  },
  {
    name: "verify",
    async run(move) {
      const before = await checkUnchanged(copyToCheck(move), move.copyTimeoutMs);
      move.progress({ rows: before.rows.reduce((a, b) => a + b, 0) });
      verified(move, before);
    },
  },
  fence,
  {
    name: "final-position",
    async run(move) {
      const position = await walPosition(move.from);
      await waitFor(
        move,
        () => reached(move.from, move.held.names.subscription, position),
        () => move.freezeTimeout("the final position (inside the fence)"),
        2,
        50,
      );
    },
  },
  {
    name: "verify-changes",
    async run(move) {
      const changed = await checkChanged(copyToCheck(move), move.held.freezeBudget);
      move.changedRows = changed.keys;
      move.progress({ rows: changed.keys });
      verified(move, changed);
    },
  },
  switchOwner,
  teardownStep,
  cleanup,
];

/** An offline move (PostgreSQL or PGlite): fence first, then copy and verify inside the fence. */
const OFFLINE: readonly Step[] = [
  receive,
  fence,
  {
    name: "copy",
    async run(move) {
      await copyRows(move);
      move.progress({ rows: await countAt(move.map.tables, move.to, move.shard) });
    },
  },
  {
    name: "verify",
    async run(move) {
      verified(move, await checkAll(copyToCheck(move)));
    },
  },
  switchOwner,
  teardownStep,
  cleanup,
];

/**
 * The steps a mover runs under its lease, in order: `cleanup: false` leaves the old copy at the
 * source. Before them come the precheck and the lease; after them, `done`.
 */
export function stepsOf(mode: "live" | "offline", options: { cleanup?: boolean | undefined } = {}): Step[] {
  return (mode === "live" ? LIVE : OFFLINE).filter((s) => !(s === cleanup && options.cleanup === false));
}

/**
 * The steps a move of `mode` reports, in order (a stopped move's `resume` comes first when there is
 * one), without `cleanup` when `cleanup: false`. For a progress bar's total; a test checks that a
 * move reports exactly these.
 */
export function moveSteps(
  mode: "live" | "offline",
  options: { cleanup?: boolean | undefined } = {},
): MoveStep[] {
  return ["precheck", "lease", ...stepsOf(mode, options).map((s) => s.name), "done"];
}

/** What the move's checks compare: its shard's rows in the map's tables, at its source and at its target. */
function copyToCheck<Client extends ShardClient>(move: MoveRun<Client>): CopyToCheck<Client> {
  return { tables: move.map.tables, from: move.from, to: move.to, shard: move.shard, sums: move.sums };
}

/** A check whose copy does not match stops the move (undone); one that matches counts its rows. */
function verified<Client extends ShardClient>(move: MoveRun<Client>, check: Check): void {
  if (check.mismatches.length > 0) throw new MoveVerifyError(move.shard, check.mismatches);
  move.map.tables.forEach((t, i) => {
    move.rows[t.table] = (move.rows[t.table] ?? 0) + check.rows[i]!;
  });
}

/**
 * `work()`; when it runs out of time while the move's slots are being made at the source (its own,
 * or its table copies'), the timeout names the transactions of the source's server they wait for.
 * They are read within `copyTimeoutMs` (the copy's deadline has passed): a database that does not
 * answer by then is named in the timeout instead.
 */
async function slotsNamed<Client extends ShardClient>(
  move: MoveRun<Client>,
  work: () => Promise<void>,
): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (!(error instanceof MoveTimeoutError)) throw error;
    const timeout = (what: string) =>
      new MoveTimeoutError(move.shard, `${error.what}${what}`, error.timeoutMs, { cause: error });
    const at = performance.now() + move.copyTimeoutMs;
    const late = (database: string) =>
      timeout(`; reading what its replication slots wait for (waiting for ${database})`);
    const waits = await bounded({ at, late }, () =>
      slotWaits(move.from, move.to, move.held.names.subscription),
    ).catch((failure: unknown) => {
      if (failure instanceof MoveTimeoutError) throw failure;
      return undefined; // a read that failed: the timeout as it is
    });
    if (waits === undefined) throw error;
    throw timeout(`: ${waits}`);
  }
}

/** Polls `check` every `everyMs` (growing to `maxMs`) until it holds; `late` throws once it is too late. */
async function waitFor<Client extends ShardClient>(
  move: MoveRun<Client>,
  check: () => Promise<boolean>,
  late: () => void,
  everyMs: number,
  maxMs: number,
): Promise<void> {
  for (let wait = everyMs; !(await check()); wait = Math.min(maxMs, wait * 2)) {
    move.held.ensure(); // a mover that lost its lease (found by its renewal) stops waiting at once
    late();
    await new Promise((r) => setTimeout(r, wait));
  }
}

/** The offline copy: every row of the shard, table by table, in batches, as the mover (each batch checked against the lease). */
async function copyRows<Client extends ShardClient>({ held, map, shard, from }: MoveRun<Client>) {
  for (const table of map.tables) {
    const rows = await raw(from).$queryRawUnsafe<{ batch: string }[]>(
      `SELECT json_agg(row_to_json(t))::text AS batch FROM (
         SELECT *, (row_number() OVER ()) / 1000 AS part FROM "${table.table}" WHERE ${shardOfRowSql(table)} = $1) t GROUP BY part`,
      shard.bits,
    );
    for (const { batch } of rows) {
      await held.copyIn((tx: Raw) =>
        tx.$executeRawUnsafe(
          `INSERT INTO "${table.table}" SELECT * FROM json_populate_recordset(NULL::"${table.table}", $1::json)`,
          batch,
        ),
      );
    }
  }
}
