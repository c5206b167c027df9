// `openShards`: one way to start a sharded service, embedded PGlite shards or real PostgreSQL by
// configuration. The PostgreSQL open is `open-postgres.ts` (its retry loops `open-recovery.ts`),
// the embedded one `open-embedded.ts`; what it takes and gives back, `open-options.ts`.
import { setRegistryLoad } from "../load/options.js";
import type { ShardClient } from "../registry.js";
import { prismaVersionWarning } from "../versions.js";
import { openEmbedded } from "./open-embedded.js";
import { logOf, type OpenShards, type OpenShardsOptions } from "./open-options.js";
import { openPostgres } from "./open-postgres.js";

export type { OpenShards, OpenShardsOptions } from "./open-options.js";

/**
 * One way to start a sharded service: embedded PGlite shards for development and demos, real
 * PostgreSQL by configuration, with the schema rolled out to every database it can reach before
 * the registry is returned. Only the configuration changes between the two; the code that uses the
 * registry does not.
 *
 * A database that is down at start does not stop the service (PostgreSQL only): its client is held
 * shut (every statement fails as unreachable, so its shards answer 503 while the others work), it is
 * retried with backoff, and when it answers it gets the same checks and the schema before it opens.
 * Configuration errors still fail the open: a database listed twice, a connection budget that
 * cannot hold, a database that answers with an error (no such database, authentication), a
 * rollout that fails on a database that answered.
 */
export async function openShards<Client extends ShardClient>(
  options: OpenShardsOptions<Client>,
): Promise<OpenShards<Client>> {
  const warning = prismaVersionWarning();
  if (warning) (options.onWarning ?? logOf(options))(warning);
  const opened =
    options.shardsJson !== undefined
      ? await openPostgres(options, options.shardsJson)
      : await openEmbedded(options);
  if (options.load !== undefined) setRegistryLoad(opened.registry, options.load);
  return opened;
}
