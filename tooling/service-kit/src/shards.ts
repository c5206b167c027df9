// Opening a service's shards at start-up: embedded PGlite databases by default (one per shard, under
// `dataDir`), or the PostgreSQL databases of `shardsJson` (`SHARDKIT_SHARDS`), each with the schema,
// and the service's routed client over them.
import { join } from "node:path";
import type { ShardIdentifier } from "@shardkit/id";
import { type ShardClient, type ShardRoutingOptions, shardRouting } from "@shardkit/prisma";
import { type OpenShards, type OpenShardsOptions, openShards } from "@shardkit/prisma/rollout";

/**
 * The shards, opened: `registry`, the routed client `db`, and from `openShards` each database's
 * state (a database down at start is `starting`, its shards answering 503, until it answers and
 * has the schema), `ready`, `health()`, `describe` and `close()`.
 */
export type ServiceShards<Client extends ShardClient, Db> = OpenShards<Client> & { db: Db };

export interface ServiceShardsOptions<Client extends ShardClient>
  extends Pick<OpenShardsOptions<Client>, "shardsJson" | "retry" | "log"> {
  /** Folder of the embedded databases (PGlite, when `shardsJson` is absent). Default `.data` in the current directory. */
  dataDir?: string;
}

/** What a service opens: its schema, its Prisma client, its embedded shards and how its models route. */
export interface ServiceLayout<Client extends ShardClient, Db> {
  /** The folder of the Prisma schema, rolled out to every shard. */
  schema: string;
  createClient: OpenShardsOptions<Client>["createClient"];
  embeddedShards: readonly ShardIdentifier[];
  /** `shardRouting`'s models: each model's key fields. */
  models: NonNullable<ShardRoutingOptions<Client>["models"]>;
  /** The routed client: `(client: PrismaClient, routing) => client.$extends(routing)` (typed by the service's client). */
  extend: (client: Client, routing: ReturnType<typeof shardRouting<Client>>) => Db;
}

/**
 * The service's `openShards`: opens the shards and makes sure every one has the schema, embedded
 * PGlite databases by default (one per shard, under `dataDir`), real PostgreSQL when `shardsJson`
 * (`SHARDKIT_SHARDS`) is given. Progress lines (schema rollout, databases not ready yet) go to `log`,
 * by default stderr.
 */
export function serviceShards<Client extends ShardClient, Db>(layout: ServiceLayout<Client, Db>) {
  return async (options: ServiceShardsOptions<Client> = {}): Promise<ServiceShards<Client, Db>> => {
    const { dataDir = join(process.cwd(), ".data"), ...rest } = options;
    const opened = await openShards({
      ...rest,
      schema: layout.schema,
      createClient: layout.createClient,
      embedded: { dataDir, shards: layout.embeddedShards },
    });
    const { registry } = opened;
    const db = layout.extend(
      registry.databases[0]!.client,
      shardRouting({ registry, models: layout.models }),
    );
    return { ...opened, db };
  };
}
