// What a partition map counts and tells as it happens (its telemetry hook): the counters, the
// signals, and `Signals`, which counts each signal and hands it to the map's `onSignal`.
import type { ShardIdentifier } from "@shardkit/id";
import type { Refusal } from "./errors.js";

/** What the map counts; `onSignal` hears each as it happens (the telemetry hook). */
export interface OwnershipCounters {
  /** Writes a database refused because it does not own their shard. */
  staleRejections: number;
  /** Times the map was read from the databases. */
  refreshes: number;
  /** Calls run again at the current owner after a refusal. */
  retries: number;
  /** Changes of owner refused because someone else changed the shard first. */
  conflicts: number;
  /** Fences this router gave back to their owner because the move holding them had stopped (its lease lapsed). */
  heals: number;
  /** Switches this router completed at the new owner (decided at the old one, whose mover stopped before). */
  completions: number;
  /**
   * Set-ups this router made in a database: shardkit's functions installed there (`functions`), or
   * the shards no database recorded recorded there (`records`). Each is made once per database,
   * by whichever router comes first: the others find it done.
   */
  installs: number;
}

export type OwnershipSignal =
  | { type: "stale_rejection"; refusal: Refusal }
  | { type: "refresh"; changed: ShardIdentifier[]; missing: string[]; problems: ShardIdentifier[] }
  | { type: "retry"; shard: ShardIdentifier; attempt: number }
  | { type: "conflict"; shard: ShardIdentifier; message: string }
  | { type: "heal"; shard: ShardIdentifier; database: string }
  | { type: "completion"; shard: ShardIdentifier; database: string }
  | { type: "install"; database: string; what: "functions" | "records" };

/** The counter each signal counts. */
const COUNTED = {
  stale_rejection: "staleRejections",
  refresh: "refreshes",
  retry: "retries",
  conflict: "conflicts",
  heal: "heals",
  completion: "completions",
  install: "installs",
} as const satisfies Record<OwnershipSignal["type"], keyof OwnershipCounters>;

/** A map's counters, and its listener of signals. */
export class Signals {
  readonly counters: OwnershipCounters = {
    staleRejections: 0,
    refreshes: 0,
    retries: 0,
    conflicts: 0,
    heals: 0,
    completions: 0,
    installs: 0,
  };

  constructor(private readonly listener: ((signal: OwnershipSignal) => void) | undefined) {}

  /** Counts `signal`, then hands it to the listener. */
  emit(signal: OwnershipSignal): void {
    this.counters[COUNTED[signal.type]]++;
    this.listener?.(signal);
  }
}
