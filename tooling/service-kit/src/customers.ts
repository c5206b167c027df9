// Where a service's customers live: four shards in two groups by default, EU customers in group 0
// and Mexican ones in group 1 (residency), spread over their group's shards by tenant; and the base
// of a service whose data lives with its customers (CustomerService).
import { isShardkitError, ShardedId, ShardIdentifier } from "@shardkit/id";
import type { HealthReport } from "@shardkit/prisma/rollout";
import { createShardSelector, type GroupOfShards, groupsFromShards } from "@shardkit/selector";
import { type Outcome, type ShardCallErrors, type ShardCallsOptions, shardCalls } from "./calls.js";

export interface CustomerProps {
  region: string;
  tenant: string;
}

/** EU countries go to group 0, Mexico to group 1; a region no rule names is refused. */
export const REGIONS = { eu: ["DE", "ES", "FR", "IE", "IT", "NL", "PT"], mx: ["MX"] };
type Region = keyof typeof REGIONS;

/** The embedded layout: four shards in two groups (0 = EU, 1 = MX), each its own PGlite database. */
export const EMBEDDED_SHARDS = [
  ShardIdentifier.of(0, 0),
  ShardIdentifier.of(0, 1),
  ShardIdentifier.of(1, 0),
  ShardIdentifier.of(1, 1),
];

/**
 * Where new customers go: the region picks the group (residency), a consistent hash of the tenant
 * picks one of the group's shards. Members are the shards the registry has in that group. `service`
 * names the service in the error a group without shards is.
 */
export function createCustomerSelector(shards: readonly ShardIdentifier[], service: string) {
  return createShardSelector<CustomerProps>({
    routingKey: "tenant",
    groups: groupsFromShards(
      shards,
      [
        { group: 0, name: "eu" },
        { group: 1, name: "mx" },
      ],
      { refuse: (empty) => refuse(empty, service) },
    ),
    rules: [
      { name: "mx", when: { region: { oneOf: REGIONS.mx } }, group: 1 },
      { name: "eu", when: { region: { oneOf: REGIONS.eu } }, group: 0 },
    ],
  });
}

/** A service's shards as `serviceShards` opens them: the routed client, the registry, their health. */
export interface CustomerShards<Tx> extends Pick<ShardCallsOptions<Tx>, "db" | "registry"> {
  health(options: { timeoutMs: number }): Promise<HealthReport>;
}

/** A service's error class (`serviceErrors`) with the codes a service of customers answers with. */
export type CustomerServiceErrors = ShardCallErrors &
  (new (
    code: "REGION_NOT_SERVED",
    message: string,
  ) => Error);

/**
 * A service whose data lives with its customers, on `shards` (`Tx`: its transaction client): a new
 * customer's shard by the service's `selector` (`customerShard`), commands and reads on one shard in
 * the service's terms (`calls`, with its `errors`), and `health()`, each database probed within the
 * deadline.
 */
export class CustomerService<S extends CustomerShards<Tx>, Tx> {
  /** Commands and reads on one shard, in the service's terms (`shardCalls`). */
  protected readonly calls;

  /** `deadlineMs`: how long a call waits for its shard's database before answering 503 (default 5 s). */
  constructor(
    protected readonly shards: S,
    private readonly placement: {
      selector: { select(props: CustomerProps): ShardIdentifier };
      errors: CustomerServiceErrors;
    },
    options: { deadlineMs?: number | undefined } = {},
  ) {
    const { db, registry } = shards;
    this.calls = shardCalls<Tx>({ db, registry, errors: placement.errors, deadlineMs: options.deadlineMs });
  }

  /** The routed client. */
  protected get db(): S["db"] {
    return this.shards.db;
  }

  /** Each shard's state: its database probed now (bounded), or why it is not ready yet. */
  health(): Promise<HealthReport> {
    return this.shards.health({ timeoutMs: this.calls.deadlineMs });
  }

  /** The shard an ID names, refusing malformed IDs and shards this deployment does not have. */
  shardOf(id: string, what: string): ShardIdentifier {
    return this.calls.shardOf(id, what);
  }

  /**
   * A new customer, once per Idempotency-Key (the command "customer" on its shard, with `input` as
   * its request): `create` writes it in the shard's transaction with `id`, an ID of the shard its
   * region and tenant choose.
   */
  protected placeCustomer<R>(
    input: CustomerProps,
    key: string,
    create: (tx: Tx, id: string) => Promise<R>,
  ): Promise<Outcome<R>> {
    const shard = this.customerShard(input);
    return this.calls.command(shard, "customer", key, input, (tx) =>
      create(tx, ShardedId.generate("Customer", shard)),
    );
  }

  /** The shard a new customer goes to; a region no rule names is REGION_NOT_SERVED (422). */
  private customerShard(input: CustomerProps): ShardIdentifier {
    try {
      return this.placement.selector.select(input);
    } catch (error) {
      if (isShardkitError(error, "NO_GROUP_MATCH"))
        throw new this.placement.errors(
          "REGION_NOT_SERVED",
          `region ${input.region} is not served by this deployment`,
        );
      throw error;
    }
  }
}

/** A customer's placement: where `selector.select({ region, tenant })` puts it. */
export interface Placement extends CustomerProps {
  shard: string;
}

/**
 * Customers to make `perShard` of on each of `shards` shards, for tests and demos that need
 * customers everywhere: tenants `<prefix>-0`, `<prefix>-1`, ... in turn, Mexican and EU regions
 * alternating, each kept while its shard has fewer than `perShard` (500 tenants at the most).
 * `perShard` counts what each shard got, in the order the shards were first found.
 */
export function customersOnEveryShard(
  selector: { select(props: CustomerProps): ShardIdentifier },
  options: { shards: number; perShard: number; prefix: string },
): { placements: Placement[]; perShard: Map<string, number> } {
  const placements: Placement[] = [];
  const perShard = new Map<string, number>();
  for (let t = 0; placements.length < options.shards * options.perShard && t < 500; t++) {
    const region = t % 2 === 0 ? REGIONS.mx[0]! : REGIONS.eu[t % REGIONS.eu.length]!;
    const tenant = `${options.prefix}-${t}`;
    const shard = selector.select({ region, tenant }).key;
    if ((perShard.get(shard) ?? 0) >= options.perShard) continue;
    perShard.set(shard, (perShard.get(shard) ?? 0) + 1);
    placements.push({ region, tenant, shard });
  }
  return { placements, perShard };
}

/** A group with no shard, said in the deployment's terms (the selector names its config: `groups[1].members`). */
function refuse(empty: readonly GroupOfShards[], service: string): Error {
  const lacking = empty.map(
    (g) =>
      `no shard of group ${g.group}, where customers of ${REGIONS[g.name as Region].join(", ")} are placed (region ${g.name})`,
  );
  const example = `{"group":${empty[0]!.group},"member":0,"url":"postgresql://..."}`;
  return new Error(
    `${service} service: bad shard configuration: ${lacking.join("; ")}. List at least one shard of each group in SHARDKIT_SHARDS, e.g. ${example}`,
  );
}
