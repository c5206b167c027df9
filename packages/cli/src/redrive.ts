import { ShardedUUID } from "@shardkit/id";
import { redriveOutbox } from "@shardkit/prisma";
import { type ConfigOptions, openConfig } from "./config.js";
import { UsageError } from "./errors.js";
import { alignRight, count, oneLine, plural, table } from "./format.js";
import { applyRecords } from "./records.js";

export interface RedriveOptions extends ConfigOptions {
  /** Only dead letters of this topic. */
  topic?: string;
  /** Only these event IDs. */
  ids?: readonly string[];
}

export interface RedriveReport {
  /** False when a database did not answer: its dead letters are still there (run it again). */
  ok: boolean;
  /**
   * Dead letters put back to pending, per database (`shards`: the keys of the shards it holds);
   * `redriven` is null and `error` says why for a database that did not answer.
   */
  databases: { database: string; shards: string; redriven: number | null; error?: string }[];
  /** Over the databases that answered. */
  redriven: number;
  filter: { topic: string | null; ids: string[] | null };
}

/**
 * Dead letters back to pending (attempts reset), to be delivered again by the services' relays:
 * `redrive` of `@shardkit/prisma`'s outbox relay, on every database at once, each for the shards it
 * holds. A database that does not answer is reported (and the report is not ok: exit code 1); the
 * others are redriven all the same, and running it again is harmless.
 */
export async function redrive(options: RedriveOptions = {}): Promise<RedriveReport> {
  const ids = options.ids && options.ids.length > 0 ? [...options.ids] : undefined;
  const bad = (ids ?? []).filter((id) => !ShardedUUID.isValid(id));
  if (bad.length > 0) throw new UsageError(bad.map((id) => `--id ${JSON.stringify(id)}: not a ShardedUUID`));
  if (options.topic !== undefined && options.topic === "") throw new UsageError(["--topic: empty"]);
  const opened = openConfig(options);
  try {
    // Label each database with the shards it holds now (shards that moved since the configuration was written).
    await applyRecords(opened, 5000);
    // The services' relays deliver what comes back to pending.
    const counts = await redriveOutbox(opened.registry, {
      ...(options.topic !== undefined ? { topic: options.topic } : {}),
      ...(ids ? { ids } : {}),
    });
    const databases = counts.map(({ database, shards, redriven, error }) => ({
      database,
      shards,
      redriven,
      ...(error !== undefined ? { error: oneLine(error) } : {}),
    }));
    return {
      ok: databases.every((d) => d.redriven !== null),
      databases,
      redriven: databases.reduce((sum, d) => sum + (d.redriven ?? 0), 0),
      filter: { topic: options.topic ?? null, ids: ids ?? null },
    };
  } finally {
    await opened.close();
  }
}

/** `redrive` for people. */
export function renderRedrive(report: RedriveReport): string {
  return `${table(
    ["DATABASE", "SHARDS", alignRight("REDRIVEN")],
    report.databases.map((d) => [
      d.database,
      d.shards || "(spare)",
      d.redriven === null ? `no answer: ${d.error ?? "unknown"}` : count(d.redriven),
    ]),
  )}\n${plural(report.redriven, "dead letter")} back to pending: the services' relays deliver ${report.redriven === 1 ? "it" : "them"} again\n${report.databases
    .filter((d) => d.redriven === null)
    .map((d) => `${d.database} did not answer: its dead letters were not redriven (run it again)\n`)
    .join("")}`;
}
