export declare const MAIN_PORT: number;
export declare function pgUrl(port: number, database: string): string;
export declare function ensureCluster(name?: string, port?: number): Promise<number>;
export declare function setClusterRunning(name: string, port: number, running: boolean): Promise<void>;
export declare function createDatabase(port: number, name: string): Promise<string>;
export declare function dropDatabase(port: number, name: string): Promise<void>;
