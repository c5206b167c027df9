export declare const MAIN_PORT: number;
export declare function pgUrl(port: number, database: string): string;
export declare function ensureCluster(name?: string, port?: number): Promise<number>;
export declare function withClusterStopped<T>(name: string, port: number, fn: () => Promise<T>): Promise<T>;
/** SIGSTOPs a cluster's server processes while `fn` runs (connections hang), then SIGCONTs them. */
export declare function withClusterFrozen<T>(name: string, fn: () => Promise<T>): Promise<T>;
export declare function createDatabase(
  port: number,
  name: string,
  options?: { collation?: "C"; template?: string },
): Promise<string>;
export declare function dropDatabase(port: number, name: string): Promise<void>;
