import { ShardedId } from "@shardkit/id";
import { idempotent } from "@shardkit/prisma";
import type { Db } from "./layout.js";

/** The desk's command: one unit of a bucket, once per idempotency key, decided in one shard transaction. */
export async function confirm(
  db: Db,
  input: { bucketId: string; desk: string; key: string },
): Promise<{ desk: string; outcome: "confirmed" | "refused"; confirmation?: string; replayed: boolean }> {
  const { bucketId, desk, key } = input;
  const result = await db.$transactionOn(bucketId, (tx) =>
    idempotent(
      tx,
      { shard: bucketId, kind: "confirm", key },
      { bucketId, desk },
      async () => {
        // The decision is one conditional write: two desks never both take the last unit.
        const taken = await tx.bucket.updateMany({
          where: { id: bucketId, remaining: { gte: 1 } },
          data: { remaining: { decrement: 1 } },
        });
        if (taken.count === 0) throw new SoldOut();
        const id = ShardedId.colocatedWith("Confirmation", bucketId);
        await tx.confirmation.create({ data: { id, bucketId, desk } });
        return { confirmation: id };
      },
      { refusal: (error) => (error instanceof SoldOut ? { code: "SOLD_OUT" } : undefined) },
    ),
  );
  if (result.refusal !== undefined) return { desk, outcome: "refused", replayed: result.replayed };
  return { desk, outcome: "confirmed", confirmation: result.result!.confirmation, replayed: result.replayed };
}

class SoldOut extends Error {}
