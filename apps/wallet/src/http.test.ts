import { randomUUID } from "node:crypto";
import { ShardedId, ShardedUUID, ShardIdentifier } from "@shardkit/id";
import { patient, withClusterFrozen, withClusterStopped } from "@shardkit/test-db";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Entry, Transfer, Wallet } from "./generated/prisma/client.js";
import { auth, bearer, operator, TEST_SECRET } from "./test/auth.js";
import { walletWorld } from "./test/world.js";

const SECOND = inject("second"); // the run's own second server, which the tests stop
const secondSkipped = inject("secondSkipped"); // why the tests that stop the second server cannot run, or ""
let world: Awaited<ReturnType<typeof walletWorld>>;
beforeAll(async () => {
  world = await walletWorld();
});
afterAll(() => world.close());

const countRows = async () => {
  let n = 0;
  for (const table of ["customer", "wallet", "entry", "transfer", "outboxEvent"] as const)
    n += (await world.all(table)).length;
  return n;
};

describe("customers and wallets", () => {
  it("places a customer by region and tenant, and colocates its wallets", async () => {
    const mx = await world.http("POST", "/customers", { name: "Carla", region: "MX", tenant: "acme" });
    expect(mx.status).toBe(201);
    expect(ShardedUUID.shardOf(mx.body.id).group).toBe(1);
    const eu = await world.http("POST", "/customers", { name: "Ana", region: "DE", tenant: "acme" });
    expect(ShardedUUID.shardOf(eu.body.id).group).toBe(0);
    const wallet = await world.http("POST", `/customers/${mx.body.id}/wallets`, { currency: "MXN" });
    expect(wallet.status).toBe(201);
    expect(ShardedUUID.shardOf(wallet.body.id)).toBe(ShardedUUID.shardOf(mx.body.id));
    expect(wallet.body.balance).toBe("0");
  });

  it("refuses a region no rule serves, with nothing written", async () => {
    const before = await countRows();
    const res = await world.http("POST", "/customers", { name: "X", region: "US", tenant: "t" });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("REGION_NOT_SERVED");
    expect(await countRows()).toBe(before);
  });
});

describe("a shard whose server is frozen", () => {
  it(
    "answers 503 naming the shard after the deadline instead of hanging; other shards answer",
    async ({ skip }) => {
      skip(secondSkipped !== "", secondSkipped);
      const frozen = await world.walletOnSecondServer("frozen");
      expect(ShardedUUID.shardOf(frozen.walletId).key).toBe("1/1"); // on the second server
      const up = await world.customerWithWallet("DE", "thawed", "EUR", "10");
      /** A deposit of 5 to the wallet on the frozen server, always with the same Idempotency-Key. */
      const depositOnFrozen = () =>
        world.http("POST", `/wallets/${frozen.walletId}/deposits`, { amount: "5" }, "frozen-deposit-1");
      await withClusterFrozen(SECOND.cluster, async () => {
        const res = await world.http("GET", `/wallets/${frozen.walletId}`);
        expect(res.status).toBe(503);
        expect(res.body).toMatchObject({ error: "SHARD_UNAVAILABLE", shard: "1/1" });
        expect(res.body.message).toMatch(/did not answer within 3000 ms/);
        expect((await world.http("GET", `/wallets/${up.walletId}`)).status).toBe(200);
        // A command there: its outcome is unknown, and the answer says so and how to learn it.
        const deposit = await depositOnFrozen();
        expect(deposit.status).toBe(503);
        expect(deposit.body).toMatchObject({ error: "SHARD_UNAVAILABLE", shard: "1/1", outcome: "unknown" });
        expect(deposit.body.message).toBe(
          "shard 1/1 did not answer within 3000 ms: the outcome is unknown (the command may have been applied); retry with the same Idempotency-Key, which returns the outcome once the shard answers",
        );
      });
      expect((await world.http("GET", `/wallets/${frozen.walletId}`)).status).toBe(200);
      // The retry with the key gets the outcome: applied once, whether the first attempt committed late or not.
      const retry = await depositOnFrozen();
      expect(retry.status).toBe(200);
      expect((await world.http("GET", `/wallets/${frozen.walletId}`)).body.wallet.balance).toBe("15");
    },
    patient(60_000),
  );
});

describe("bad text and huge input", () => {
  it("NUL characters and lone surrogates are refused with 400 naming the field, and nothing is written", async () => {
    const before = await countRows();
    for (const name of ["a\u0000b", "x\uD800", "\uDC00y"]) {
      const res = await world.http("POST", "/customers", { name, region: "DE", tenant: "t" });
      expect(res.status, JSON.stringify(name)).toBe(400);
      expect(res.body.message).toMatch(/^body\.name: must not contain (NUL characters|lone surrogates)/);
    }
    const paired = await world.http("POST", "/customers", {
      name: "emoji \uD83D\uDE00",
      region: "DE",
      tenant: "t",
    });
    expect(paired.status).toBe(201); // a well-formed pair is text like any other
    expect(paired.body.name).toBe("emoji \u{1F600}");
    expect(await countRows()).toBe(before + 1);
  });

  it("a body giving a key twice is refused with 400 naming the key, and nothing moves", async () => {
    const { walletId } = await world.customerWithWallet("DE", "dup", "EUR");
    const deposit = (payload: string) =>
      world.app.inject({
        method: "POST",
        url: `/wallets/${walletId}/deposits`,
        headers: {
          "idempotency-key": `dup-${payload.length}-${Date.now()}`,
          "content-type": "application/json",
          ...bearer(operator),
        },
        payload,
      });
    const twice = await deposit('{"amount":1,"amount":1000000000000}');
    expect([twice.statusCode, twice.json()]).toEqual([
      400,
      {
        error: "VALIDATION",
        message: "amount: given twice in the body (each key once)",
        issues: ["amount: given twice in the body (each key once)"],
      },
    ]);
    const nested = await deposit('{"amount":5,"meta":{"a":1,"a":2}}');
    expect(nested.json().message).toBe("meta.a: given twice in the body (each key once)");
    expect((await world.http("GET", `/wallets/${walletId}`)).body.wallet.balance).toBe("0");
    const once = await deposit('{"amount":7}');
    expect(once.statusCode).toBe(200);
    expect((await world.http("GET", `/wallets/${walletId}`)).body.wallet.balance).toBe("7");
  });

  it("a body with 60,000 unknown keys gets a small error, not an echo of the keys", async () => {
    const body: Record<string, unknown> = { name: "n", region: "DE", tenant: "t" };
    for (let i = 0; i < 60_000; i++) body[`k${i}`] = 0; // about 600 KB: under the 1 MiB body limit
    const res = await world.http("POST", "/customers", body);
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body).length).toBeLessThan(2000);
  });
});

describe("idempotency keys", () => {
  it("a refused command is recorded: its replay answers the same refusal, even once it would succeed", async () => {
    const { walletId } = await world.customerWithWallet("DE", "refusal", "EUR", "10");
    const key = randomUUID();
    const first = await world.http("POST", `/wallets/${walletId}/withdrawals`, { amount: "50" }, key);
    expect(first.status).toBe(409);
    expect(first.body.error).toBe("INSUFFICIENT_FUNDS");
    await world.http("POST", `/wallets/${walletId}/deposits`, { amount: "100" });
    const replay = await world.http("POST", `/wallets/${walletId}/withdrawals`, { amount: "50" }, key);
    expect(replay.status).toBe(409);
    expect(replay.body).toEqual(first.body);
    expect((await world.http("GET", `/wallets/${walletId}`)).body.wallet.balance).toBe("110");
  });

  it("one key for a deposit and then a withdrawal is a conflict: the second never executes", async () => {
    const { walletId } = await world.customerWithWallet("DE", "kinds", "EUR", "100");
    const key = randomUUID();
    expect((await world.http("POST", `/wallets/${walletId}/deposits`, { amount: "5" }, key)).status).toBe(
      200,
    );
    const other = await world.http("POST", `/wallets/${walletId}/withdrawals`, { amount: "5" }, key);
    expect(other.status).toBe(409);
    expect(other.body.error).toBe("IDEMPOTENCY_CONFLICT");
    expect((await world.http("GET", `/wallets/${walletId}`)).body.wallet.balance).toBe("105");
  });
});

describe("concurrency", () => {
  it("40 concurrent same-shard transfers in opposite directions: none answers 500, money is conserved", async () => {
    const a = await world.customerWithWallet("FR", "opposite", "EUR", "1000");
    const b = (await world.http("POST", `/customers/${a.customerId}/wallets`, { currency: "EUR" })).body
      .id as string;
    await world.http("POST", `/wallets/${b}/deposits`, { amount: "1000" });
    // Each client does what a 503 of unknown outcome says: it retries with its Idempotency-Key (on a
    // busy machine a transfer may wait past the service's deadline behind the others' locks).
    const transfer = async (body: object) => {
      const key = randomUUID();
      for (;;) {
        const answer = await world.http("POST", "/transfers", body, key);
        if (answer.status !== 503 || answer.body.outcome !== "unknown") return answer;
      }
    };
    const transfers = Array.from({ length: 40 }, (_, i) =>
      transfer(
        i % 2 === 0
          ? { fromWalletId: a.walletId, toWalletId: b, amount: "7" }
          : { fromWalletId: b, toWalletId: a.walletId, amount: "5" },
      ),
    );
    const answers = await Promise.all(transfers);
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
    // Deadlocks are avoided, not just reported: no transfer is refused as busy.
    expect(statuses.filter((s) => s === 201).length).toBe(40);
    const balances = await Promise.all(
      [a.walletId, b].map(async (id) =>
        BigInt((await world.http("GET", `/wallets/${id}`)).body.wallet.balance),
      ),
    );
    expect(balances).toEqual([1000n - 20n * 7n + 20n * 5n, 1000n - 20n * 5n + 20n * 7n]);
  });
});

describe("a shard whose server is down", () => {
  it(
    "answers 503 naming the shard, with a retry hint, for reads, writes and lists; other shards answer",
    async ({ skip }) => {
      skip(secondSkipped !== "", secondSkipped);
      const down = await world.walletOnSecondServer("down");
      expect(ShardedUUID.shardOf(down.walletId).key).toBe("1/1");
      const up = await world.customerWithWallet("DE", "up", "EUR", "10");
      await withClusterStopped(SECOND.cluster, SECOND.port, async () => {
        for (const [method, url, body] of [
          ["GET", `/wallets/${down.walletId}`, undefined],
          ["POST", `/wallets/${down.walletId}/deposits`, { amount: "1" }],
        ] as const) {
          const res = await world.http(method, url, body);
          expect(res.status, url).toBe(503);
          expect(res.body).toMatchObject({ error: "SHARD_UNAVAILABLE", shard: "1/1" });
          expect(res.headers["retry-after"]).toBe("1");
        }
        const list = await world.http("GET", "/admin/wallets?limit=5");
        expect(list.status).toBe(503);
        expect(list.body.missing).toEqual(["1/1"]);
        expect((await world.http("GET", `/wallets/${up.walletId}`)).status).toBe(200);
      });
      expect((await world.http("GET", `/wallets/${down.walletId}`)).status).toBe(200);
    },
    patient(60_000),
  );
});

describe("money moves", () => {
  it("deposit and withdraw change the balance and write the ledger; overdrafts are refused", async () => {
    const { walletId } = await world.customerWithWallet("DE", "t1", "EUR", "1000");
    const out = await world.http("POST", `/wallets/${walletId}/withdrawals`, { amount: 300 });
    expect(out.status).toBe(200);
    expect(out.body.balance).toBe("700");
    const over = await world.http("POST", `/wallets/${walletId}/withdrawals`, { amount: "701" });
    expect(over.status).toBe(409);
    expect(over.body.error).toBe("INSUFFICIENT_FUNDS");
    const view = await world.http("GET", `/wallets/${walletId}`);
    expect(view.body.wallet.balance).toBe("700");
    expect(view.body.entries.map((e: Entry) => [e.kind, String(e.amount), String(e.balanceAfter)])).toEqual([
      ["deposit", "1000", "1000"],
      ["withdrawal", "-300", "700"],
    ]);
  });

  it("a same-shard transfer completes in one transaction", async () => {
    const a = await world.customerWithWallet("FR", "t2", "EUR", "500");
    const second = (await world.http("POST", `/customers/${a.customerId}/wallets`, { currency: "EUR" }))
      .body as Wallet;
    const res = await world.transfer(a.walletId, second.id, "200");
    expect(res.status).toBe(201);
    expect(res.body.status).toBe("completed");
    expect((await world.http("GET", `/wallets/${second.id}`)).body.wallet.balance).toBe("200");
    expect(
      (await world.all("outboxEvent")).filter(
        (e) => (e as { aggregateId: string }).aggregateId === res.body.id,
      ),
    ).toEqual([]);
  });

  it("a cross-shard transfer is a saga: pending, then completed once the relay runs", async () => {
    const eu = await world.customerWithWallet("ES", "t3", "EUR", "1000");
    const mx = await world.customerWithWallet("MX", "t3", "EUR");
    const res = await world.transfer(eu.walletId, mx.walletId, "400");
    expect(res.status).toBe(202);
    expect(res.body.status).toBe("pending");
    expect((await world.http("GET", `/wallets/${eu.walletId}`)).body.wallet.balance).toBe("600");
    await world.drain();
    expect((await world.http("GET", `/transfers/${res.body.id}`)).body.status).toBe("completed");
    expect((await world.http("GET", `/wallets/${mx.walletId}`)).body.wallet.balance).toBe("400");
  });

  it("a transfer the destination refuses is refunded, and the state says why", async () => {
    const eu = await world.customerWithWallet("IT", "t4", "EUR", "1000");
    const mx = await world.customerWithWallet("MX", "t4", "MXN");
    const res = await world.transfer(eu.walletId, mx.walletId, "250");
    expect(res.status).toBe(202);
    await world.drain();
    const transfer = (await world.http("GET", `/transfers/${res.body.id}`)).body as Transfer;
    expect(transfer.status).toBe("refunded");
    expect(transfer.reason).toMatch(/holds MXN, not EUR/);
    const source = (await world.http("GET", `/wallets/${eu.walletId}`)).body;
    expect(source.wallet.balance).toBe("1000");
    expect(source.entries.map((e: Entry) => e.kind)).toEqual(["deposit", "transfer_out", "refund"]);
    expect((await world.http("GET", `/wallets/${mx.walletId}`)).body.wallet.balance).toBe("0");
  });
});

describe("bad input gets a clear 4xx and writes nothing", () => {
  it.each([
    ["negative amount", { amount: -5 }, /amount: must be a positive integer/],
    ["zero", { amount: "0" }, /amount: must be greater than 0/],
    ["fractional", { amount: 1.5 }, /amount: must be a positive integer/],
    ["huge", { amount: "99999999999999999" }, /amount: must be at most 1000000000000/],
    ["not a number", { amount: "12.50" }, /amount: must be a positive integer/],
    ["extra field", { amount: "5", note: "x" }, /Unrecognized key/],
  ])("%s", async (_label, body, message) => {
    const { walletId } = await world.customerWithWallet("PT", "bad", "EUR", "100");
    const before = await countRows();
    const res = await world.http("POST", `/wallets/${walletId}/deposits`, body);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(message);
    expect(await countRows()).toBe(before);
  });

  it("malformed and unknown IDs", async () => {
    const malformed = await world.http("POST", "/wallets/not-an-id/deposits", { amount: "5" });
    expect([malformed.status, malformed.body.error]).toEqual([400, "VALIDATION"]);
    const v4 = await world.http("GET", "/wallets/0f8fad5b-d9cb-469f-a165-70867728950e");
    expect(v4.status).toBe(400);
    const unknownShard = await world.http(
      "GET",
      `/wallets/${ShardedId.generate("Wallet", ShardIdentifier.of(9, 9))}`,
    );
    expect([unknownShard.status, unknownShard.body.error]).toEqual([404, "NOT_FOUND"]);
    const missing = await world.http(
      "GET",
      `/wallets/${ShardedId.generate("Wallet", ShardIdentifier.of(0, 1))}`,
    );
    expect(missing.status).toBe(404);
    const unknownTarget = await world.customerWithWallet("DE", "u", "EUR", "10");
    const before = await countRows();
    const res = await world.transfer(
      unknownTarget.walletId,
      ShardedId.generate("Wallet", ShardIdentifier.of(7, 0)),
      "5",
    );
    expect(res.status).toBe(404);
    expect(await countRows()).toBe(before);
  });

  it("mutations need an Idempotency-Key; a retry replays the result; another body with the key is a conflict", async () => {
    const { walletId } = await world.customerWithWallet("NL", "idem", "EUR");
    const none = await world.http("POST", `/wallets/${walletId}/deposits`, { amount: "5" }, null);
    expect([none.status, none.body.error]).toEqual([400, "IDEMPOTENCY_KEY_REQUIRED"]);
    const first = await world.http("POST", `/wallets/${walletId}/deposits`, { amount: "5" }, "deposit-key-1");
    const retry = await world.http("POST", `/wallets/${walletId}/deposits`, { amount: "5" }, "deposit-key-1");
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
    expect(retry.headers["idempotent-replayed"]).toBe("true");
    const before = await countRows();
    const conflict = await world.http(
      "POST",
      `/wallets/${walletId}/deposits`,
      { amount: "6" },
      "deposit-key-1",
    );
    expect([conflict.status, conflict.body.error]).toEqual([409, "IDEMPOTENCY_CONFLICT"]);
    expect(await countRows()).toBe(before);
    expect((await world.http("GET", `/wallets/${walletId}`)).body.wallet.balance).toBe("5");
  });
});

describe("admin list across shards", () => {
  it("pages every wallet newest first, exactly, across all databases", async () => {
    for (const [i, region] of ["DE", "MX", "ES", "MX", "FR", "MX", "IT"].entries()) {
      await world.customerWithWallet(region, `list-${i}`, region === "MX" ? "MXN" : "EUR");
    }
    const everything = (await world.all<Wallet>("wallet")).sort(
      (a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? -1 : 1),
    );
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await world.http("GET", `/admin/wallets?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.wallets.map((w: Wallet) => w.id));
      cursor = res.body.nextCursor;
    } while (cursor);
    expect(seen).toEqual(everything.map((w) => w.id));
    const bad = await world.http("GET", "/admin/wallets?cursor=garbage");
    expect(bad.status).toBe(400);
  });
});

describe("credentials", () => {
  it("every route but /health answers 401 without a valid credential, and changes nothing", async () => {
    const { walletId, customerId } = await world.customerWithWallet("DE", "anon", "EUR", "500");
    const customers = (await world.all("customer")).length;
    const routes: ["GET" | "POST", string, unknown][] = [
      ["POST", "/customers", { name: "x", region: "DE", tenant: "x" }],
      ["POST", `/customers/${customerId}/wallets`, { currency: "EUR" }],
      ["POST", `/wallets/${walletId}/deposits`, { amount: 1 }],
      ["POST", `/wallets/${walletId}/withdrawals`, { amount: 1 }],
      ["POST", "/transfers", { fromWalletId: walletId, toWalletId: walletId, amount: 1 }],
      ["GET", `/wallets/${walletId}`, undefined],
      ["GET", `/transfers/${walletId}`, undefined],
      ["GET", "/admin/wallets", undefined],
      ["GET", "/no/such/route", undefined],
    ];
    const [header, payload, signature] = operator.split(".");
    const flip = (s: string) => (s[0] === "A" ? "B" : "A") + s.slice(1);
    const other = await (await import("./auth.js"))
      .createAuth("another-secret-0123456789abcdef-xyz")
      .issue({ role: "admin", subject: "tests" });
    const expired = await auth.issue({ role: "admin", subject: "tests" }, "-1m");
    const unsigned = `${Buffer.from('{"alg":"none"}').toString("base64url")}.${payload}.`;
    for (const token of [
      null,
      "garbage",
      `${header}.${payload}.${flip(signature!)}`,
      other,
      expired,
      unsigned,
    ]) {
      for (const [method, url, body] of routes) {
        const res = await world.http(method, url, body, randomUUID(), token);
        expect([url, token?.slice(0, 12), res.status, res.body.error]).toEqual([
          url,
          token?.slice(0, 12),
          401,
          "UNAUTHENTICATED",
        ]);
        expect(res.headers["www-authenticate"]).toBe('Bearer realm="wallet"');
        expect(JSON.stringify(res.body)).not.toMatch(/at .+\.ts|stack/);
      }
    }
    // A token of a known role without a string subject names nobody (never "any customer").
    const { SignJWT } = await import("jose");
    for (const sub of [null, "", 42]) {
      const token = await new SignJWT({ role: "customer", sub } as Record<string, unknown>)
        .setProtectedHeader({ alg: "HS256" })
        .setAudience("shardkit-wallet")
        .setExpirationTime("1h")
        .sign(new TextEncoder().encode(TEST_SECRET));
      const res = await world.http("GET", "/admin/wallets", undefined, null, token);
      expect([sub, res.status, res.body.error]).toEqual([sub, 401, "UNAUTHENTICATED"]);
    }
    expect((await world.http("GET", "/health", undefined, null, null)).status).toBe(200);
    expect((await world.http("GET", `/wallets/${walletId}`)).body.wallet.balance).toBe("500");
    expect(await world.all("customer")).toHaveLength(customers);
  });

  it("a customer reaches only its own wallets and transfers; another's answer 404 as if absent; operator routes 403", async () => {
    // One tenant: one shard, where Idempotency-Keys are recorded side by side.
    const ana = await world.customerWithWallet("DE", "one-tenant", "EUR", "1000");
    const bo = await world.customerWithWallet("DE", "one-tenant", "EUR", "1000");
    expect(ShardedUUID.shardOf(ana.walletId).key).toBe(ShardedUUID.shardOf(bo.walletId).key);
    const asAna = await auth.issue({ role: "customer", customerId: ana.customerId });
    const asBo = await auth.issue({ role: "customer", customerId: bo.customerId });
    // Ana's own: allowed.
    expect((await world.http("GET", `/wallets/${ana.walletId}`, undefined, null, asAna)).status).toBe(200);
    expect(
      (await world.http("POST", `/wallets/${ana.walletId}/deposits`, { amount: 5 }, undefined, asAna)).status,
    ).toBe(200);
    const sent = await world.http(
      "POST",
      "/transfers",
      { fromWalletId: ana.walletId, toWalletId: bo.walletId, amount: 100 },
      undefined,
      asAna,
    );
    expect(sent.status).toBeLessThan(300);
    expect((await world.http("GET", `/transfers/${sent.body.id}`, undefined, null, asAna)).status).toBe(200);
    expect(
      (
        await world.http(
          "POST",
          `/customers/${ana.customerId}/wallets`,
          { currency: "EUR" },
          undefined,
          asAna,
        )
      ).status,
    ).toBe(201);
    // Bo's, as Ana: 404, nothing moves.
    const refused: ["GET" | "POST", string, unknown][] = [
      ["GET", `/wallets/${bo.walletId}`, undefined],
      ["POST", `/wallets/${bo.walletId}/deposits`, { amount: 5 }],
      ["POST", `/wallets/${bo.walletId}/withdrawals`, { amount: 5 }],
      ["POST", "/transfers", { fromWalletId: bo.walletId, toWalletId: ana.walletId, amount: 900 }],
      ["POST", `/customers/${bo.customerId}/wallets`, { currency: "EUR" }],
      ["GET", `/transfers/${sent.body.id}`, undefined],
    ];
    for (const [method, url, body] of refused) {
      const token = url.startsWith("/transfers/") ? asBo : asAna;
      const res = await world.http(method, url, body, randomUUID(), token);
      expect([url, res.status, res.body.error]).toEqual([url, 404, "NOT_FOUND"]);
    }
    for (const [method, url, body] of [
      ["POST", "/customers", { name: "x", region: "DE", tenant: "x" }],
      ["GET", "/admin/wallets", undefined],
    ] as const) {
      const res = await world.http(method, url, body, randomUUID(), asAna);
      expect([url, res.status, res.body.error]).toEqual([url, 403, "FORBIDDEN"]);
    }
    // Idempotency-Keys are each caller's own: Bo's key is no conflict for Ana, nor her answer his.
    const key = `shared-key-${Date.now()}`;
    const boDeposit = await world.http("POST", `/wallets/${bo.walletId}/deposits`, { amount: 7 }, key, asBo);
    const anaDeposit = await world.http(
      "POST",
      `/wallets/${ana.walletId}/deposits`,
      { amount: 3 },
      key,
      asAna,
    );
    expect([boDeposit.status, anaDeposit.status, anaDeposit.body.id]).toEqual([200, 200, ana.walletId]);
    await world.drain();
    const balance = async (id: string) => (await world.http("GET", `/wallets/${id}`)).body.wallet.balance;
    expect([await balance(ana.walletId), await balance(bo.walletId)]).toEqual(["908", "1107"]);
  });
});

describe("a real listening port", () => {
  it("serves the same API over HTTP", async () => {
    const base = await world.app.listen({ port: 0, host: "127.0.0.1" });
    const response = await fetch(`${base}/customers`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": "port-test-1", ...bearer(operator) },
      body: JSON.stringify({ name: "Net", region: "IE", tenant: "net" }),
    });
    expect(response.status).toBe(201);
    const body = (await response.json()) as { id: string };
    expect(ShardedUUID.shardOf(body.id).group).toBe(0);
  });
});
