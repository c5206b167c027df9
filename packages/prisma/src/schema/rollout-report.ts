// What a schema rollout reports: a module of its own, so that the error carrying a report
// (SchemaRolloutError) and the rollout that makes it do not import each other.
import type { FingerprintState } from "./schema-fingerprint.js";

export type { FingerprintState } from "./schema-fingerprint.js";

export type RolloutStatus = "applied" | "unchanged" | "failed" | "skipped";

export interface RolloutTargetReport {
  name: string;
  shards: string[];
  status: RolloutStatus;
  /** push: statements executed; migrate: migrations applied. */
  changes: number;
  appliedMigrations: string[];
  warnings: string[];
  /** From its start (the fingerprint check, when there is one) to its end. */
  durationMs: number;
  /**
   * What the fingerprint check found, when the rollout checked (`skipUnchanged`; `openShards`
   * always does): `'matched'` means the target is `unchanged` without the schema engine having run.
   * Absent when it did not check, and for targets skipped before their check.
   */
  fingerprint?: FingerprintState;
  error?: string;
}

export interface RolloutReport {
  mode: "push" | "migrate";
  ok: boolean;
  targets: RolloutTargetReport[];
}
