import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { RegistryConfigError, UnknownShardError } from "./errors.js";
import type { OwnershipHook } from "./ownership.js";
import {
  type DatabaseLabels,
  freezeLabels,
  labelsSchema,
  type PlacementRules,
  readPlacementRules,
  sameLabels,
} from "./placement.js";
import type {
  Database,
  ReplicaOptions,
  ShardClient,
  ShardRef,
  ShardRegistryOptions,
  ShardReplica,
} from "./registry-types.js";
import { endSharedPool } from "./shared-pool.js";

// Its types (what a registry is made of) are registry-types.ts's.
export type * from "./registry-types.js";

/**
 * Maps each logical shard to the client of the physical database that holds it. Several logical
 * shards may live in one database (pre-split: 16 members on 2 servers), so members can later move
 * to new servers without changing a single ID. One client (own driver adapter and pool) per
 * physical database.
 */
export class ShardRegistry<Client extends ShardClient = ShardClient> {
  /** Every logical shard, ordered by bits. */
  readonly shards: readonly ShardIdentifier[];
  /** Every physical database, with the shards it holds. */
  readonly databases: readonly Database<Client>[];
  readonly defaultShard: ShardIdentifier | undefined;
  readonly unknownShard: "fail" | "default";
  /**
   * The placement rules (`options.placement`): `registry.placement.violation(shard, labels)` says why
   * a database may not hold a shard; `registry.placement.allows` is the same over a `Database`.
   */
  readonly placement: PlacementRules;
  /** The partition map's hook, when one is attached. */
  ownership: OwnershipHook | undefined;
  private readonly byBits: (Database<Client> | undefined)[] = new Array(1 << 14);
  private readonly epochs = new Map<number, number>();
  private readonly logger: { warn(message: string): void };

  // Longer than 80 lines: every entry checked in one pass, each problem named, before any state.
  constructor(options: ShardRegistryOptions<Client>) {
    const issues: string[] = [];
    if (!options || !Array.isArray(options.shards) || options.shards.length === 0)
      throw new RegistryConfigError(["shards: at least one shard is required"]);
    const physicalByClient = new Map<Client, Database<Client>>();
    /** The database of `client`, made (without shards yet) the first time a client is named. */
    const databaseOf = (client: Client): { database: Database<Client>; added: boolean } => {
      const known = physicalByClient.get(client);
      if (known) return { database: known, added: false };
      const database: Database<Client> = {
        client,
        shards: [],
        index: 0,
        name: "",
        pool: undefined,
        replicas: [],
        labels: NO_LABELS,
      };
      physicalByClient.set(client, database);
      return { database, added: true };
    };
    const seen = new Map<number, number>();
    options.shards.forEach((entry, i) => {
      const shard = toShardOrIssue(entry?.shard, `shards[${i}].shard`, issues);
      if (!entry?.client || typeof entry.client.$disconnect !== "function") {
        issues.push(`shards[${i}].client: expected a PrismaClient (an object with $disconnect)`);
        return;
      }
      if (!shard) return;
      const previous = seen.get(shard.bits);
      if (previous !== undefined) {
        issues.push(`shards[${i}].shard: duplicate shard ${shard.key} (also shards[${previous}])`);
        return;
      }
      seen.set(shard.bits, i);
      databaseOf(entry.client).database.shards.push(shard);
    });
    const unknownShard = options.unknownShard ?? "fail";
    if (unknownShard !== "fail" && unknownShard !== "default") {
      issues.push(`unknownShard: expected 'fail' or 'default', got ${JSON.stringify(unknownShard)}`);
    }
    let defaultShard: ShardIdentifier | undefined;
    if (options.defaultShard !== undefined) {
      defaultShard = toShardOrIssue(options.defaultShard, "defaultShard", issues);
      if (defaultShard && !seen.has(defaultShard.bits)) {
        issues.push(`defaultShard: ${defaultShard.key} is not one of the registered shards`);
      }
    } else if (unknownShard === "default") {
      issues.push("defaultShard: required when unknownShard is 'default'");
    }
    if (issues.length > 0) throw new RegistryConfigError(issues);

    const { spares, given } = readDatabases(options.databases, databaseOf, issues);
    readReplicas(given, physicalByClient, issues);
    if (issues.length > 0) throw new RegistryConfigError(issues);

    const physical = [...physicalByClient.values()].filter((p) => !spares.includes(p));
    for (const p of physical) p.shards.sort((a, b) => a.bits - b.bits);
    physical.sort((a, b) => a.shards[0]!.bits - b.shards[0]!.bits);
    physical.push(...spares);
    physical.forEach((p, index) => {
      p.index = index;
      if (p.name === "") p.name = `database #${index}`;
      p.replicas.forEach((r, j) => {
        if (r.name === "") r.name = `${p.name} replica #${j}`;
      });
      for (const shard of p.shards) this.byBits[shard.bits] = p;
    });
    const placement = readPlacementRules(options.placement, physical);
    if (placement.issues.length > 0) throw new RegistryConfigError(placement.issues);
    this.placement = placement.rules;
    this.databases = physical;
    this.shards = physical.flatMap((p) => p.shards).sort((a, b) => a.bits - b.bits);
    this.defaultShard = defaultShard;
    this.unknownShard = unknownShard;
    this.logger = options.logger ?? console;
  }

  /**
   * The shard's ownership epoch: 0 in a static registry; a partition map's epoch once one is
   * attached (`@shardkit/ownership`). It only grows, but for a record set back (`assign`).
   */
  epochOf(shard: ShardIdentifier): number {
    return this.epochs.get(shard.bits) ?? 0;
  }

  /**
   * Places a registered shard on `database` at `epoch`: the partition map's way to apply a change
   * of owner to routing. An epoch lower than the shard's current one is refused (a map never goes
   * back) unless `setBack` says the map means it (a record set back, a restored backup, that a
   * later read found still so); the same epoch with another database is refused (two owners).
   */
  assign(shard: ShardIdentifier, database: Database<Client>, epoch: number, setBack = false): void {
    const current = this.byBits[shard.bits];
    if (!current) throw new UnknownShardError(shard, this.shards);
    if (!this.databases.includes(database)) {
      throw new RegistryConfigError([`assign: ${database.name} is not a database of this registry`]);
    }
    const known = this.epochOf(shard);
    if (
      !Number.isSafeInteger(epoch) ||
      (epoch < known && !setBack) ||
      (epoch === known && current !== database && known > 0)
    ) {
      throw new RegistryConfigError([
        `assign: shard ${shard.key} is at epoch ${known} on ${current.name}; epoch ${epoch} on ${database.name} would go back or give it two owners`,
      ]);
    }
    this.epochs.set(shard.bits, epoch);
    if (current === database) return;
    current.shards.splice(current.shards.indexOf(shard), 1);
    database.shards.push(shard);
    database.shards.sort((a, b) => a.bits - b.bits);
    this.byBits[shard.bits] = database;
  }

  /** Installs a partition map's hook (see `OwnershipHook`): refused writes are retried at the current owner. */
  attachOwnership(hook: OwnershipHook | undefined): void {
    this.ownership = hook;
  }

  /** True when the shard is registered (no fallback applied). */
  has(shard: ShardIdentifier): boolean {
    return this.byBits[shard.bits] !== undefined;
  }

  /**
   * The registered shard a shard ref or sharded ID names. An unknown shard throws
   * `UnknownShardError`, or (with `unknownShard: 'default'`) resolves to the default shard and is
   * logged. A malformed ID throws `InvalidShardedIdError`.
   */
  resolve(shardOrId: ShardRef): ShardIdentifier {
    const shard = toShard(shardOrId);
    if (this.byBits[shard.bits] !== undefined) return shard;
    if (this.unknownShard === "default" && this.defaultShard) {
      this.logger.warn(
        `[shardkit] shard ${shard.key} is not in the registry; routing to default shard ${this.defaultShard.key} (unknownShard: 'default')`,
      );
      return this.defaultShard;
    }
    throw new UnknownShardError(shard, this.shards);
  }

  /** The physical database holding a (registered) shard. */
  databaseOf(shardOrId: ShardRef): Database<Client> {
    return this.byBits[this.resolve(shardOrId).bits]!;
  }

  /** The client of the physical database that holds the shard or ID. */
  clientFor(shardOrId: ShardRef): Client {
    return this.databaseOf(shardOrId).client;
  }

  /** Disconnects every physical database's client, and its replicas' clients. */
  /** Run (and awaited, failures ignored) before `disconnect` closes the clients: a router's last load flush. */
  readonly beforeDisconnect = new Set<() => Promise<unknown>>();

  async disconnect(): Promise<void> {
    const last = [...this.beforeDisconnect];
    this.beforeDisconnect.clear();
    await Promise.all(last.map((run) => run().catch(() => {})));
    const clients = this.databases.flatMap((p) => [p.client, ...p.replicas.map((r) => r.client)]);
    await Promise.all(clients.map((client) => client.$disconnect()));
    // A pool shared with shardkit's own statements (`openShards`' clients) outlives its client's engine.
    await Promise.all(clients.map((client) => endSharedPool(client)));
  }
}

const NO_LABELS: DatabaseLabels = Object.freeze({});

/** Where each database's replicas were given (the first time), as given. */
type GivenReplicas<Client extends ShardClient> = Map<
  Database<Client>,
  { at: number; replicas: readonly unknown[] }
>;

/**
 * `databases` (the registry's option) read into the databases of `databaseOf`: their names, pools
 * and labels, the spares (databases no shard is on yet), and each one's replicas as given (read by
 * `readReplicas`). Each problem goes to `issues`, named by its path.
 */
function readDatabases<Client extends ShardClient>(
  databases: ShardRegistryOptions<Client>["databases"],
  databaseOf: (client: Client) => { database: Database<Client>; added: boolean },
  issues: string[],
): { spares: Database<Client>[]; given: GivenReplicas<Client> } {
  const spares: Database<Client>[] = [];
  /** Each database's replicas as given, with where they were given (the first time). */
  const given: GivenReplicas<Client> = new Map();
  const labelsAt = new Map<Database<Client>, { at: number; labels: DatabaseLabels }>();
  for (const [i, described] of (databases ?? []).entries()) {
    if (!described?.client || typeof described.client.$disconnect !== "function") {
      issues.push(`databases[${i}].client: expected a PrismaClient (an object with $disconnect)`);
      continue;
    }
    const { database: physical, added } = databaseOf(described.client);
    if (added) spares.push(physical);
    if (described.replicas !== undefined) {
      const before = given.get(physical);
      if (!Array.isArray(described.replicas)) {
        issues.push(`databases[${i}].replicas: expected an array of clients`);
      } else if (before && before.replicas.length > 0 && described.replicas.length > 0) {
        issues.push(
          `databases[${i}].replicas: this database's replicas are already given in databases[${before.at}]; give them once`,
        );
      } else if (!before || described.replicas.length > 0) {
        given.set(physical, { at: i, replicas: described.replicas });
      }
    }
    if (described.pool !== undefined && !(Number.isSafeInteger(described.pool) && described.pool >= 1)) {
      issues.push(`databases[${i}].pool: expected an integer >= 1, got ${JSON.stringify(described.pool)}`);
    }
    physical.pool = described.pool;
    if (described.name !== undefined) physical.name = described.name;
    if (described.labels !== undefined) {
      const parsed = labelsSchema.safeParse(described.labels);
      if (!parsed.success) {
        issues.push(
          `databases[${i}].labels: expected { [name]: string } with non-empty names, got ${JSON.stringify(described.labels)}`,
        );
      } else {
        const labels = freezeLabels(parsed.data);
        const before = labelsAt.get(physical);
        if (before && !sameLabels(before.labels, labels))
          issues.push(
            `databases[${i}].labels: differ from the labels given for the same client in databases[${before.at}]`,
          );
        else {
          labelsAt.set(physical, { at: i, labels });
          physical.labels = labels;
        }
      }
    }
  }
  return { spares, given };
}

/** Each database's replicas from what was given: clients of their own, each the replica of one database. */
function readReplicas<Client extends ShardClient>(
  given: GivenReplicas<Client>,
  primaries: ReadonlyMap<Client, Database<Client>>,
  issues: string[],
): void {
  const replicaAt = new Map<unknown, string>();
  for (const [physical, { at, replicas }] of given) {
    const list: ShardReplica<Client>[] = [];
    replicas.forEach((entry, j) => {
      const path = `databases[${at}].replicas[${j}]`;
      const bare = typeof (entry as ShardClient | undefined)?.$disconnect === "function";
      const options = (bare ? { client: entry } : entry) as ReplicaOptions<Client> | undefined;
      if (!options?.client || typeof options.client.$disconnect !== "function") {
        issues.push(
          `${path}: expected a PrismaClient (an object with $disconnect) or { client, name?, pool? }`,
        );
        return;
      }
      if (primaries.has(options.client)) {
        issues.push(
          `${path}: this client is a database of the registry (a primary); a replica needs a client of its own`,
        );
        return;
      }
      const previous = replicaAt.get(options.client);
      if (previous !== undefined) {
        issues.push(
          `${path}: the same replica client as ${previous}; a client is the replica of one database, once`,
        );
        return;
      }
      replicaAt.set(options.client, path);
      if (options.pool !== undefined && !(Number.isSafeInteger(options.pool) && options.pool >= 1)) {
        issues.push(`${path}.pool: expected an integer >= 1, got ${JSON.stringify(options.pool)}`);
      }
      list.push({ client: options.client, name: options.name ?? "", pool: options.pool });
    });
    physical.replicas = list;
  }
}

/** Builds a registry (see `ShardRegistry`). Throws `RegistryConfigError` listing every problem. */
export function createShardRegistry<Client extends ShardClient>(
  options: ShardRegistryOptions<Client>,
): ShardRegistry<Client> {
  return new ShardRegistry(options);
}

/** A ShardIdentifier from a shard ref or a sharded ID string. */
export function toShard(value: ShardRef): ShardIdentifier {
  if (value instanceof ShardIdentifier) return value;
  if (typeof value === "string") {
    return value.length === 36 ? ShardedUUID.shardOf(value) : ShardIdentifier.parse(value);
  }
  if (value && typeof value === "object" && "group" in value && "member" in value) {
    return ShardIdentifier.of(value.group, value.member);
  }
  return ShardedUUID.shardOf(value as unknown as string); // throws InvalidShardedIdError
}

function toShardOrIssue(value: unknown, path: string, issues: string[]): ShardIdentifier | undefined {
  if (value === undefined || value === null) {
    issues.push(`${path}: required`);
    return undefined;
  }
  try {
    return toShard(value as ShardRef);
  } catch (err) {
    issues.push(`${path}: ${err instanceof Error ? err.message : String(err)}`);
    return undefined;
  }
}
