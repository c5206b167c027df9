// The PostgreSQL clusters of this package's tests, made by the global setup (all at once) and
// dropped when the run ends. Their ports are used by no other package's tests.
/** A plain cluster that the status test stops, to see a database down. */
export const DOWN = { cluster: "skclidown", port: 5450 };
/** A plain cluster that the dashboard's browser test stops, to see its column turn down. */
export const DASH = { cluster: "skclidash", port: 5453 };
/** A plain cluster that the dashboard's 1,024-shard browser test stops. */
export const FLEET = { cluster: "skclifleet", port: 5454 };
/** Two servers with wal_level = logical, for a live move: its source and its target. */
export const LIVE = {
  source: { cluster: "skclisrc", port: 5451 },
  target: { cluster: "skclidst", port: 5452 },
};
