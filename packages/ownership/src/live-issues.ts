// What a live move needs of its two servers (`precheck`'s part for live moves), each missing piece
// named before anything starts.
import type { Database, ShardClient } from "@shardkit/prisma";
import { raw } from "./raw.js";

/**
 * What a live move needs of its two servers, each missing piece named: at the source, wal_level =
 * logical, a free replication slot and WAL sender, and a role that may make slots; at the target, a
 * role that may make subscriptions and a free logical replication worker. Two databases of one
 * server are fine (the move makes its slot apart).
 */
export async function liveIssues<Client extends ShardClient>(from: Database<Client>, to: Database<Client>) {
  type Source = {
    level: string;
    slots: number;
    maxSlots: number;
    senders: number;
    maxSenders: number;
    may: boolean;
  };
  type Target = { workers: number; maxWorkers: number; may: boolean };
  const [[source], [target]] = await Promise.all([
    raw(from).$queryRawUnsafe<Source[]>(
      `SELECT current_setting('wal_level') AS level,
         (SELECT count(*)::int FROM pg_replication_slots) AS slots,
         current_setting('max_replication_slots')::int AS "maxSlots",
         (SELECT count(*)::int FROM pg_stat_replication) AS senders,
         current_setting('max_wal_senders')::int AS "maxSenders",
         (SELECT rolsuper OR rolreplication FROM pg_roles WHERE rolname = current_user) AS may`,
    ),
    raw(to).$queryRawUnsafe<Target[]>(
      `SELECT (SELECT count(*)::int FROM pg_stat_subscription WHERE pid IS NOT NULL) AS workers,
         current_setting('max_logical_replication_workers')::int AS "maxWorkers",
         (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS may`,
    ),
  ]);
  const issues: string[] = [];
  if (source!.level !== "logical")
    issues.push(
      `${from.name}: wal_level is ${source!.level}; a live move needs wal_level = logical (or use mode: 'offline')`,
    );
  if (source!.slots >= source!.maxSlots)
    issues.push(
      `${from.name}: all ${source!.maxSlots} replication slots are taken (max_replication_slots); a live move needs one`,
    );
  if (source!.senders >= source!.maxSenders)
    issues.push(
      `${from.name}: all ${source!.maxSenders} WAL senders are busy (max_wal_senders); a live move needs one, and one per table copied at once`,
    );
  if (!source!.may)
    issues.push(`${from.name}: its role may not make replication slots (it needs REPLICATION or superuser)`);
  if (!target!.may) issues.push(`${to.name}: its role may not make subscriptions (it needs superuser)`);
  if (target!.workers >= target!.maxWorkers)
    issues.push(
      `${to.name}: all ${target!.maxWorkers} logical replication workers are busy (max_logical_replication_workers); a live move needs one`,
    );
  return issues;
}
