import { ShardedId, ShardIdentifier } from "@shardkit/id";
import { withShardDeadline } from "@shardkit/prisma";
import { type Outcome, shardCalls } from "@shardkit/service-kit/calls";
import { AllocationsError } from "./errors.js";
import type { Bucket, Confirmation, Hold } from "./generated/prisma/client.js";
import type { Router } from "./shards.js";

export type { Outcome };

type Tx = Parameters<Parameters<Router["db"]["$transactionOn"]>[1]>[0];

/**
 * The allocations service. A bucket's holds and confirmations live on the bucket's shard, so each
 * decision (is a unit left? take it) is one conditional write in one shard transaction, recorded
 * under the client's Idempotency-Key. The router's partition map sends a decision that reached a
 * former owner (a shard moved) to the current one, where its key finds any recorded outcome.
 */
export class AllocationService {
  /** How long a call waits for its shard's database before answering 503 naming the shard (ms). */
  readonly deadlineMs: number;

  /** Commands on one shard, in the allocations service's terms (`shardCalls`). */
  private readonly calls;

  /** `deadlineMs`: how long a call waits for its shard's database before answering 503 (default 5 s). */
  constructor(
    private readonly router: Router,
    options: { deadlineMs?: number | undefined } = {},
  ) {
    const deadlineMs = options.deadlineMs ?? 5000;
    if (!(Number.isInteger(deadlineMs) && deadlineMs > 0)) {
      throw new RangeError(
        `AllocationService: deadlineMs must be a positive whole number of ms, got ${deadlineMs}`,
      );
    }
    this.deadlineMs = deadlineMs;
    const { db, registry } = router;
    this.calls = shardCalls<Tx>({ db, registry, errors: AllocationsError, deadlineMs });
  }

  private get db() {
    return this.router.db;
  }

  /** The shard a bucket ID names; a malformed ID or one of a shard this deployment lacks is refused. */
  shardOf(id: string, what: string): ShardIdentifier {
    return this.calls.shardOf(id, what);
  }

  /** A new bucket on `shard` (default: chosen by its name's hash over the deployment's shards). */
  createBucket(
    input: { name: string; capacity: number; shard?: string | undefined },
    key: string,
  ): Promise<Outcome<Bucket>> {
    const shards = this.router.registry.shards;
    const shard = input.shard
      ? this.shardNamed(input.shard)
      : shards[[...input.name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7) % shards.length]!;
    return this.calls.command(shard, "bucket", key, input, (tx) =>
      tx.bucket.create({
        data: { id: ShardedId.generate("Bucket", shard), name: input.name, capacity: input.capacity },
      }),
    );
  }

  /** A shard the client named: one of this deployment's, else a 400 that says which it has. */
  private shardNamed(key: string): ShardIdentifier {
    const shards = this.router.registry.shards;
    let named: ShardIdentifier | undefined;
    try {
      named = ShardIdentifier.parse(key);
    } catch {
      // out of range: not a shard of any deployment
    }
    const shard = named && shards.find((s) => s.equals(named));
    if (!shard) {
      throw new AllocationsError(
        "VALIDATION",
        `shard: this deployment has no shard ${JSON.stringify(key)}; it has ${shards.map((s) => s.key).join(", ")}`,
      );
    }
    return shard;
  }

  /** Holds `units` of a bucket for a desk, if the bucket has them free. */
  hold(bucketId: string, units: number, desk: string, key: string): Promise<Outcome<Hold>> {
    const shard = this.shardOf(bucketId, "bucket_id");
    return this.calls.command(shard, "hold", key, { bucketId, units, desk }, async (tx) => {
      await this.take(tx, bucketId, units, "held");
      return tx.hold.create({
        data: { id: ShardedId.colocatedWith("Hold", bucketId), bucketId, desk, units },
      });
    });
  }

  /**
   * Confirms an allocation: a hold of the bucket (its units move from held to confirmed), or
   * `units` taken directly if the bucket has them free. SOLD_OUT when it does not; the refusal is
   * recorded under the key too.
   */
  confirm(
    input: { bucketId: string; desk: string; holdId?: string | undefined; units?: number | undefined },
    key: string,
  ): Promise<Outcome<Confirmation>> {
    const shard = this.shardOf(input.bucketId, "bucket_id");
    if (input.holdId !== undefined && this.shardOf(input.holdId, "hold_id") !== shard) {
      throw new AllocationsError(
        "NOT_FOUND",
        `hold ${input.holdId} is not a hold of bucket ${input.bucketId}`,
      );
    }
    return this.calls.command(shard, "confirm", key, input, async (tx) => {
      let units = input.units ?? 1;
      if (input.holdId !== undefined) {
        const hold = await tx.hold.updateMany({
          // A desk confirms only its own holds: another desk's answers as one not held.
          where: { id: input.holdId, bucketId: input.bucketId, desk: input.desk, status: "held" },
          data: { status: "confirmed" },
        });
        if (hold.count === 0)
          throw new AllocationsError(
            "HOLD_NOT_ACTIVE",
            `hold ${input.holdId} is not held on this bucket for desk ${JSON.stringify(input.desk)}`,
          );
        units = (await tx.hold.findUniqueOrThrow({ where: { id: input.holdId } })).units;
        await tx.bucket.update({
          where: { id: input.bucketId },
          data: { held: { decrement: units }, confirmed: { increment: units } },
        });
      } else {
        await this.take(tx, input.bucketId, units, "confirmed");
      }
      return tx.confirmation.create({
        data: {
          id: ShardedId.colocatedWith("Confirmation", input.bucketId),
          bucketId: input.bucketId,
          holdId: input.holdId ?? null,
          desk: input.desk,
          units,
        },
      });
    });
  }

  /** Takes `units` free units of a bucket in one conditional write: two desks never both take the last one. */
  private async take(tx: Tx, bucketId: string, units: number, as: "held" | "confirmed") {
    const taken = await tx.$executeRawUnsafe(
      `UPDATE "Bucket" SET "${as}" = "${as}" + $2 WHERE id = $1::uuid AND held + confirmed + $2 <= capacity`,
      bucketId,
      units,
    );
    if (taken === 0) {
      const exists = await tx.bucket.findUnique({ where: { id: bucketId }, select: { id: true } });
      if (!exists) throw new AllocationsError("NOT_FOUND", `bucket ${bucketId} not found`);
      throw new AllocationsError("SOLD_OUT", `bucket ${bucketId} has fewer than ${units} units free`, {
        bucketId,
      });
    }
  }

  /** A bucket and its number of confirmations; past the deadline, 503 naming its shard (`SHARD_TIMEOUT`). */
  async getBucket(bucketId: string): Promise<Bucket & { confirmations: number }> {
    const shard = this.shardOf(bucketId, "bucket");
    const [bucket, confirmations] = await withShardDeadline(shard, this.deadlineMs, () =>
      Promise.all([
        this.db.bucket.findUnique({ where: { id: bucketId } }),
        this.db.confirmation.count({ where: { bucketId } }),
      ]),
    );
    if (!bucket) throw new AllocationsError("NOT_FOUND", `bucket ${bucketId} not found`);
    return { ...bucket, confirmations };
  }
}
