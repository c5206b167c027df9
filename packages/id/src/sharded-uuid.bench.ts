import { randomUUID } from "node:crypto";
import { v7 as uuidV7 } from "uuid";
import { bench, describe } from "vitest";
import { ShardIdentifier } from "./shard-identifier.js";
import { ShardedUUID } from "./sharded-uuid.js";

// Each benchmark iteration makes BATCH calls, so the harness's own per-iteration cost does not
// swamp nanosecond operations: divide the reported mean by BATCH for the time per call.
const BATCH = 1000;
const shard = ShardIdentifier.of(0xa5, 0x2c);
const ids = Array.from({ length: BATCH }, (_, i) => ShardedUUID.generate(ShardIdentifier.fromBits(i * 13)));
let sink = 0;

describe(`generate (x${BATCH} per iteration)`, () => {
  bench("crypto.randomUUID() [baseline]", () => {
    for (let i = 0; i < BATCH; i++) sink += randomUUID().length;
  });
  bench("ShardedUUID.generate(shard)", () => {
    for (let i = 0; i < BATCH; i++) sink += ShardedUUID.generate(shard).length;
  });
  bench("uuid v7()", () => {
    for (let i = 0; i < BATCH; i++) sink += uuidV7().length;
  });
});

describe(`decode (x${BATCH} per iteration)`, () => {
  bench("string length read [loop baseline]", () => {
    for (let i = 0; i < BATCH; i++) sink += ids[i]!.length;
  });
  bench("ShardedUUID.shardOf(id)", () => {
    for (let i = 0; i < BATCH; i++) sink += ShardedUUID.shardOf(ids[i]!).bits;
  });
  bench("ShardedUUID.timestampOf(id)", () => {
    for (let i = 0; i < BATCH; i++) sink += ShardedUUID.timestampOf(ids[i]!);
  });
});

export { sink };
