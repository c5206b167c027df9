// What a shard registry is made of: the options `createShardRegistry` reads, and the databases,
// replicas and clients it keeps (the registry itself, and how it reads its options: registry.ts).
import type { ShardIdentifier } from "@shardkit/id";
import type { DatabaseLabels, PlacementRuleInput } from "./placement.js";

/**
 * Anything that names a shard: a ShardIdentifier, its key ("1/5"), `{ group, member }`, or a
 * ShardedUUID (whose bits name its shard).
 */
export type ShardRef = ShardIdentifier | string | { group: number; member: number };

/** The client of one physical database: anything with `$disconnect` (a PrismaClient). */
export interface ShardClient {
  $disconnect(): Promise<void>;
}

export interface ShardRegistryOptions<Client extends ShardClient> {
  /** One entry per logical shard. Several shards may share one client (one physical database). */
  shards: ReadonlyArray<{ shard: ShardRef; client: Client }>;
  /**
   * What is known of each client's database: a name for messages and reports (a password-less URL)
   * and its pool size, which `checkConnectionBudget` adds up per server. Optional per client. A
   * client named here that holds no shard is a spare database (the target of a shard move): it
   * comes after the others in `physical` and no plan reaches it until it owns a shard.
   */
  databases?: ReadonlyArray<{
    client: Client;
    name?: string;
    pool?: number;
    /**
     * Labels of the database (`{ region: "eu" }`), which `placement` rules match. Default: none. A
     * client listed twice gives the same labels (or leaves them out).
     */
    labels?: Record<string, string>;
    /**
     * Read replicas of this database (streaming copies, read-only): each a client, or the client
     * with a name for messages and its pool size for `checkConnectionBudget`. Reads made outside
     * any transaction or action go to them in turn (see `shardRouting`); everything else stays on
     * `client`. A replica is the replica of one database only, and never a primary itself.
     */
    replicas?: ReadonlyArray<Client | ReplicaOptions<Client>>;
  }>;
  /** Where `unknownShard: 'default'` sends IDs of unknown shards. Must be one of `shards`. */
  defaultShard?: ShardRef;
  /**
   * What an ID that names a shard not in `shards` does. `'fail'` (default): throws
   * `UnknownShardError`. `'default'`: goes to `defaultShard` and is logged (for staged rollouts).
   */
  unknownShard?: "fail" | "default";
  /** Receives the warnings `unknownShard: 'default'` logs. Default: `console.warn`. */
  logger?: { warn(message: string): void };
  /**
   * Placement rules: `[{ groups: [1, 2], labels: { region: "eu" } }]` (a value list, `region: ["eu",
   * "ch"]`, means any of them): the data of those groups may live only on databases whose `labels`
   * match. A rule naming a label no database has, or matching no database, or a group under two
   * rules, is refused (`RegistryConfigError`); a shard the registry places on a database that breaks
   * its rule is not (it is there already): `shardkit doctor` reports it, and moves refuse to make more.
   */
  placement?: readonly PlacementRuleInput[];
}

/** A read replica as given to `createShardRegistry` with its name and pool (else the bare client). */
export interface ReplicaOptions<Client> {
  client: Client;
  /** How messages name it (a password-less URL). Default: `<database name> replica #<j>`. */
  name?: string;
  /** Connections its client's pool may open, counted on its own server by `checkConnectionBudget`. */
  pool?: number;
}

/** A read replica of a physical database: a streaming, read-only copy of it, with its own client and pool. */
export interface ShardReplica<Client> {
  client: Client;
  name: string;
  pool: number | undefined;
}

/** One physical database and the logical shards it holds. */
export interface Database<Client> {
  client: Client;
  /** Logical shards held by this database, ordered by bits. */
  shards: ShardIdentifier[];
  /** Position in `registry.databases` (ordered by the lowest shard each holds). */
  index: number;
  /** How messages name it: a password-less URL when known, else `database #index`. */
  name: string;
  /** Connections its client's pool may open, when known (from the config). */
  pool: number | undefined;
  /** Its read replicas, in the order given (empty without any). */
  replicas: readonly ShardReplica<Client>[];
  /** Its labels (`{ region: "eu" }`), which placement rules match; empty when none were given. */
  labels: DatabaseLabels;
}
