import { type Id, type ShardedId, ShardedUUID } from "@shardkit/id";
import { z } from "zod";

/**
 * A zod schema for `ShardedId<Model>`: a canonical lowercase version-7 UUID. Errors read
 * "Expected a Wallet ID (lowercase UUID version 7), got ..." rather than a regex dump.
 */
export function zShardedId<Model extends string>(model: Model): z.ZodType<ShardedId<Model>, string> {
  return z
    .string({ error: `Expected a ${model} ID (string)` })
    .refine((value) => ShardedUUID.isValid(value), {
      error: (issue) =>
        `Expected a ${model} ID (lowercase UUID version 7), got ${JSON.stringify(issue.input)}`,
    }) as unknown as z.ZodType<ShardedId<Model>, string>;
}

/** A zod schema for a plain `Id<Model>`: any canonical UUID (any version), case-insensitive. */
export function zId<Model extends string>(model: Model): z.ZodType<Id<Model>, string> {
  return z.string({ error: `Expected a ${model} ID (string)` }).refine((value) => UUID.test(value), {
    error: (issue) => `Expected a ${model} ID (UUID), got ${JSON.stringify(issue.input)}`,
  }) as unknown as z.ZodType<Id<Model>, string>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
