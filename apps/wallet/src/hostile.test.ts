import { ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { checkHostileInput } from "@shardkit/test-db/hostile";
import { afterAll, beforeAll, expect, it } from "vitest";
import { auth, operator } from "./test/auth.js";
import { walletWorld } from "./test/world.js";

// Hostile input on every route (checkHostileInput): whatever a caller sends (any path segment,
// body, query, cursor, header), the answer is a 2xx, a 4xx naming the problem, or a 503 naming the
// shard, never a 500, and an error body never carries a stack trace, SQL or a connection string.
let world: Awaited<ReturnType<typeof walletWorld>>;
/** IDs made before the run, and credentials: an operator, the customer of `mine`, another customer. */
const known: Record<string, string> = {};
const credentials: Record<string, string> = {};
beforeAll(async () => {
  world = await walletWorld();
  const mine = await world.customerWithWallet("DE", "hostile", "EUR", "1000");
  const theirs = await world.customerWithWallet("MX", "hostile", "MXN", "1000");
  const transfer = await world.transfer(
    mine.walletId,
    (await world.customerWithWallet("DE", "other", "EUR")).walletId,
    "1",
  );
  const page = await world.http("GET", "/admin/wallets?limit=1");
  Object.assign(known, {
    "my-customer": mine.customerId,
    "my-wallet": mine.walletId,
    "their-customer": theirs.customerId,
    "their-wallet": theirs.walletId,
    "my-transfer": transfer.body.id,
    cursor: page.body.nextCursor,
  });
  Object.assign(credentials, {
    operator,
    mine: await auth.issue({ role: "customer", customerId: mine.customerId }),
    theirs: await auth.issue({ role: "customer", customerId: theirs.customerId }),
  });
});
afterAll(() => world?.close());

it("no input answers 500, and no error body carries internals", { timeout: 600_000 }, async () => {
  const seen = await checkHostileInput(world.app, {
    routes: {
      "POST /customers": { name: "n", region: "DE", tenant: "t" },
      "POST /customers/:id/wallets": { currency: "EUR" },
      "POST /wallets/:id/deposits": { amount: "1" },
      "POST /wallets/:id/withdrawals": { amount: "1" },
      "POST /transfers": { fromWalletId: "my-wallet", toWalletId: "their-wallet", amount: "1" },
      "GET /transfers/:id": {},
      "GET /wallets/:id": {},
      "GET /admin/wallets": {},
      "GET /health": {},
    },
    fields: ["name", "region", "tenant", "currency", "amount", "fromWalletId", "toWalletId"],
    known,
    credentials,
    shardedId: (bits) => ShardedUUID.generate(ShardIdentifier.fromBits(bits)),
    query: { names: ["limit", "cursor"], cursors: ["cursor"] },
    // Beside each route as an operator and without a credential: a customer on an operator's route,
    // another customer's wallet.
    examples: [
      { route: "GET /admin/wallets", credential: "mine" },
      { route: "GET /wallets/:id", id: "their-wallet", credential: "mine" },
    ],
  });
  // The inputs reached every layer: the service's answers as well as the refusals before it.
  expect([...seen].sort()).toEqual(expect.arrayContaining([200, 201, 400, 401, 403, 404]));
});
