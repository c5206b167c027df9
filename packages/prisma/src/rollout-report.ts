// What a schema rollout reports: a module of its own, so that the error carrying a report
// (SchemaRolloutError) and the rollout that makes it do not import each other.

export type RolloutStatus = "applied" | "unchanged" | "failed" | "skipped";

export interface RolloutTargetReport {
  name: string;
  shards: string[];
  status: RolloutStatus;
  /** push: statements executed; migrate: migrations applied. */
  changes: number;
  appliedMigrations: string[];
  warnings: string[];
  durationMs: number;
  error?: string;
}

export interface RolloutReport {
  mode: "push" | "migrate";
  ok: boolean;
  targets: RolloutTargetReport[];
}
