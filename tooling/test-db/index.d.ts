export declare const MAIN_PORT: number;
export declare function pgUrl(port: number, database: string): string;
/**
 * A PostgreSQL cluster `name` on 127.0.0.1:`port`, created if absent (trust auth, loopback only)
 * and started if down. `logical: true` gives it `wal_level = logical` (restarting it once if it
 * ran without). `main` is the machine's own server: only started.
 */
export declare function ensureCluster(
  name?: string,
  port?: number,
  options?: { logical?: boolean },
): Promise<number>;
/** Stops and drops a cluster a test created (never `main`). */
export declare function dropCluster(name: string): Promise<void>;
export declare function withClusterStopped<T>(name: string, port: number, fn: () => Promise<T>): Promise<T>;
/** SIGSTOPs a cluster's server processes while `fn` runs (connections hang), then SIGCONTs them. */
export declare function withClusterFrozen<T>(name: string, fn: () => Promise<T>): Promise<T>;
export declare function createDatabase(
  port: number,
  name: string,
  options?: { collation?: "C"; template?: string },
): Promise<string>;
export declare function dropDatabase(port: number, name: string): Promise<void>;
