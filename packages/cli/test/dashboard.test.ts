/// <reference lib="dom" />
// `shardkit dashboard` in a real browser (Debian's Chromium, driven by playwright-core) against real
// PostgreSQL databases: the map shows shards where the records say, a move started from the CLI
// shows its step and then its outcome, a database stopped turns its column down while the rest go
// on, the balancer's plan runs from the page, and no answer ever carries a password.
import { ShardIdentifier } from "@shardkit/id";
import { MAIN_PORT, patient, withClusterStopped } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DashboardSnapshot } from "../src/index.js";
import {
  launchChromium,
  type RunningDashboard,
  recordLoad,
  screenshot,
  startDashboardCli,
} from "./browser.js";
import { configFile, SLOW, shardkit, testDatabases } from "./cli.js";
import { fileServer } from "./clusters.js";
import { rowsPerShard, seed } from "./seed.js";

// Three databases: a and b on the machine's server, c on a cluster of the package's tests that one
// test stops. Their URLs carry a password (trust auth ignores it): no page may show it.
const PASSWORD = "Pw-d4shb0ard-s3cret";
const DASH = fileServer("skclidash");
const { names, urls } = testDatabases("dash", { a: MAIN_PORT, b: MAIN_PORT, c: DASH });
const secret = (url: string) => url.replace("postgresql://postgres@", `postgresql://postgres:${PASSWORD}@`);
/** The dashboard's name of a database: host:port/database. */
const shown = (key: "a" | "b" | "c") => `127.0.0.1:${key === "c" ? DASH.port : MAIN_PORT}/${names[key]}`;

const LAYOUT: Record<string, "a" | "b" | "c"> = {
  "0/0": "a",
  "0/1": "a",
  "0/5": "a",
  "0/6": "a",
  "0/2": "b",
  "0/3": "b",
  "0/4": "c",
};

let config = "";
let dashboard: RunningDashboard;
let chromium: { browser: Browser; close(): Promise<void> };
let page: Page;
/** Every byte of every snapshot the dashboard streamed, from the start. */
let streamed = "";
const stream = new AbortController();

/** Waits until `predicate` holds in the page (it is evaluated there, every 100 ms). */
function until<A>(predicate: (arg: A) => boolean, arg: A, timeout = 60_000) {
  return page.waitForFunction(predicate as (arg: unknown) => boolean, arg, { timeout, polling: 100 });
}

/**
 * Holds a move of `shard` (from `source`) at its target: a transaction there writes a row with the
 * key of one of the shard's rows and stays open, so the move's first write of that key at the
 * target waits for it. `release` rolls it back (nothing of it stays) and the move goes on.
 */
async function holdShardAt(target: string, source: string, shard: string) {
  const reader = new pg.Client({ connectionString: source });
  await reader.connect();
  const { rows } = await reader.query(
    `SELECT id FROM "Wallet" WHERE (((get_byte(uuid_send(id), 8) & 63) << 8) | get_byte(uuid_send(id), 9)) = $1 LIMIT 1`,
    [ShardIdentifier.parse(shard).bits],
  );
  await reader.end();
  const blocker = new pg.Client({ connectionString: target });
  await blocker.connect();
  await blocker.query("BEGIN");
  await blocker.query("SET LOCAL shardkit.mover = 'on'");
  await blocker.query(`INSERT INTO "Wallet" (id, owner, balance) VALUES ($1, 'blocker', 0)`, [rows[0].id]);
  return {
    async release() {
      await blocker.query("ROLLBACK");
      await blocker.end();
    },
  };
}

const cellSelector = (database: string, shard: string) =>
  `[data-testid=database][data-name="${database}"] [data-testid=shard][data-key="${shard}"]`;

beforeAll(async () => {
  for (const key of ["a", "b", "c"] as const) {
    const shards = Object.entries(LAYOUT).filter(([, db]) => db === key);
    await seed(urls[key], Object.fromEntries(shards.map(([shard]) => [shard, 20])));
  }
  // Load as routers record it: a's three shards busy, the others quiet.
  await recordLoad(urls.a, [
    { shard: "0/0", calls: 600, msPerCall: 2, top: { "9f2c01": 300, "77ab10": 100 } },
    { shard: "0/1", calls: 50, msPerCall: 2 },
    { shard: "0/5", calls: 600, msPerCall: 2 },
    { shard: "0/6", calls: 600, msPerCall: 2 },
  ]);
  await recordLoad(urls.b, [
    { shard: "0/2", calls: 50, msPerCall: 2 },
    { shard: "0/3", calls: 50, msPerCall: 2 },
  ]);
  await recordLoad(urls.c, [{ shard: "0/4", calls: 50, msPerCall: 2 }]);
  config = configFile("dash", {
    shards: Object.entries(LAYOUT).map(([key, db]) => {
      const shard = ShardIdentifier.parse(key);
      return { group: shard.group, member: shard.member, url: secret(urls[db]), labels: { zone: db } };
    }),
  });
  dashboard = await startDashboardCli([
    "--config",
    config,
    "--refresh",
    "300",
    ...SLOW,
    "--window",
    "600000",
    "--table",
    "Wallet",
    "--mode",
    "offline",
    "--allow-actions",
  ]);
  // A reader of the event stream beside the browser, keeping every byte for the last test.
  void fetch(`${dashboard.origin}/api/events`, { signal: stream.signal })
    .then(async (response) => {
      const decoder = new TextDecoder();
      const reader = response.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        streamed += decoder.decode(value, { stream: true });
      }
    })
    .catch(() => {});
  chromium = await launchChromium();
  page = await chromium.browser.newPage({ viewport: { width: 1400, height: 1000 } });
}, patient(120_000));

afterAll(async () => {
  stream.abort();
  await chromium?.close();
  if (dashboard) expect(await dashboard.stop()).toBe(0);
});

describe("shardkit dashboard in a browser", () => {
  it("loads in well under 300 KB, and shows every shard in its database's column", async () => {
    const sizes: Promise<number>[] = [];
    page.on("requestfinished", (request) => {
      if (new URL(request.url()).pathname === "/api/events") return;
      sizes.push(request.sizes().then((s) => s.responseBodySize + s.responseHeadersSize));
    });
    await page.goto(dashboard.url);
    await until(() => document.body.dataset.connection === "live", null);
    await until(
      (layout) =>
        Object.entries(layout).every(
          ([shard, database]) =>
            document.querySelectorAll(
              `[data-testid=database][data-name="${database}"] [data-testid=shard][data-key="${shard}"]`,
            ).length === 1,
        ),
      Object.fromEntries(Object.entries(LAYOUT).map(([shard, db]) => [shard, shown(db)])),
    );
    const transferred = (await Promise.all(sizes)).reduce((a, b) => a + b, 0);
    console.log(`dashboard page: ${transferred} bytes transferred`);
    expect(transferred).toBeGreaterThan(0);
    expect(transferred).toBeLessThan(300_000);
    // The hottest shard is the reddest, and its top keys show on selection.
    const heat = (key: string) =>
      page.locator(`[data-testid=shard][data-key="${key}"]`).getAttribute("data-heat");
    expect(Number(await heat("0/0"))).toBe(1);
    expect(Number(await heat("0/2"))).toBeLessThan(0.2);
    await page.locator(`[data-testid=shard][data-key="0/0"]`).click();
    await until(() => document.querySelectorAll("[data-testid=top-key]").length === 2, null);
    expect(await page.locator("[data-testid=shard-detail]").textContent()).toContain("9f2c01");
    await screenshot(page, "dashboard-map");
  });

  it("a move started from the CLI shows its step and progress, then its outcome in the history, and the plan is made again", async () => {
    const startedAt = Date.now();
    const held = await holdShardAt(urls.b, urls.a, "0/1");
    const moving = shardkit([
      "move",
      "0/1",
      "--config",
      config,
      "--to",
      names.b,
      "--table",
      "Wallet",
      "--mode",
      "offline",
      ...SLOW,
    ]);
    try {
      await until(() => {
        const row = document.querySelector(`[data-testid=move][data-shard="0/1"]`) as HTMLElement | null;
        const bar = row?.querySelector("progress");
        return !!row && row.dataset.step !== "precheck" && !!bar && bar.value > 0;
      }, null);
      // Not switched yet: the shard is still a's.
      expect(await page.locator(cellSelector(shown("a"), "0/1")).count()).toBe(1);
      await screenshot(page, "dashboard-move");
      // An action on a shard already moving is refused, and changes nothing.
      const refused = await fetch(`${dashboard.origin}/api/actions/drain`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-shardkit-action": "drain" },
        body: JSON.stringify({ database: shown("a") }),
      });
      expect(refused.status).toBe(409);
      expect((await refused.json()).message).toContain("0/1");
    } finally {
      await held.release();
    }
    const run = await moving;
    expect(run.stderr).not.toContain("failed");
    expect(run.code).toBe(0);
    await until(
      () =>
        document.querySelector(`[data-testid=move-ended][data-shard="0/1"][data-outcome=moved]`) !== null &&
        document.querySelector(`[data-testid=move][data-shard="0/1"]`) === null,
      null,
    );
    // The plan made before the move is stale once the dashboard reads the move: it is made again,
    // from where the shard is now, without anyone pressing Re-plan.
    await eventually("the plan is made again after the move from the CLI", async () => {
      const { plan } = (await (await fetch(`${dashboard.origin}/api/state`)).json()) as DashboardSnapshot;
      return (
        plan !== null &&
        Date.parse(plan.at) > startedAt &&
        plan.stale === null &&
        plan.moves.every((m) => m.shard !== "0/1" || m.from === shown("b"))
      );
    });
  });

  it("the map shows each shard where the ownership records say, with its epoch", async () => {
    const status = await shardkit(["status", "--json", "--config", config, ...SLOW]);
    const report = JSON.parse(status.stdout) as {
      shards: { shard: string; database: string; epoch: number }[];
    };
    const expected = report.shards.map((s) => ({
      key: s.shard,
      database: new URL(s.database).host + new URL(s.database).pathname,
      epoch: String(s.epoch),
    }));
    expect(expected.find((s) => s.key === "0/1")).toMatchObject({ database: shown("b"), epoch: "2" });
    await until(
      (cells) =>
        cells.every((c) => {
          const cell = document.querySelector(
            `[data-testid=database][data-name="${c.database}"] [data-testid=shard][data-key="${c.key}"]`,
          ) as HTMLElement | null;
          return cell?.dataset.epoch === c.epoch && cell.dataset.state === "owned";
        }),
      expected,
    );
  });

  it("a database stopped turns its column down, and the rest go on updating", async () => {
    await withClusterStopped(DASH.cluster, DASH.port, async () => {
      await until(
        (name) =>
          (document.querySelector(`[data-testid=database][data-name="${name}"]`) as HTMLElement | null)
            ?.dataset.state === "down" &&
          document.querySelector(`[data-testid=problem][data-kind=down]`) !== null,
        shown("c"),
      );
      // b records more load meanwhile: its shard's figure changes on the page.
      const before = Number(await page.locator(cellSelector(shown("b"), "0/2")).getAttribute("data-load"));
      await recordLoad(urls.b, [{ shard: "0/2", calls: 100, msPerCall: 2 }], { agoMs: 20_000 });
      await until(
        ([selector, old]) =>
          Number((document.querySelector(selector) as HTMLElement | null)?.dataset.load) > old,
        [cellSelector(shown("b"), "0/2"), before] as const,
      );
      expect(
        await page.locator(`[data-testid=database][data-name="${shown("a")}"]`).getAttribute("data-state"),
      ).toBe("up");
      await screenshot(page, "dashboard-down");
    });
    await until(
      (name) =>
        (document.querySelector(`[data-testid=database][data-name="${name}"]`) as HTMLElement | null)?.dataset
          .state === "up",
      shown("c"),
    );
  });

  it(
    "runs the balancer's plan from the page once confirmed, pauses after the move under way, resumes, and loses no row",
    async () => {
      await page.locator("[data-action=plan]").click();
      await until(
        () => document.querySelector("[data-testid=message]")?.textContent?.startsWith("planned") === true,
        null,
      );
      const shownPlan = (await (await fetch(`${dashboard.origin}/api/state`)).json()) as DashboardSnapshot;
      const planned = shownPlan.plan!.moves;
      expect(planned.length).toBeGreaterThan(1);
      // The page shows the plan the server made, each move from where its shard is now.
      await until(
        (moves) =>
          moves.every(
            (m) =>
              document.querySelector(`[data-testid=plan-move][data-shard="${m.shard}"]`) !== null &&
              document.querySelector(
                `[data-testid=database][data-name="${m.from}"] [data-testid=shard][data-key="${m.shard}"]`,
              ) !== null,
          ),
        planned,
      );
      await screenshot(page, "dashboard-plan");
      const keyOf = (name: string) => (["a", "b", "c"] as const).find((k) => shown(k) === name)!;
      const [first, ...rest] = planned;
      // The first move waits at its target on a row this test writes there, until the test lets go.
      const held = await holdShardAt(urls[keyOf(first!.to)], urls.a, first!.shard);
      try {
        await page.locator("[data-action=balance]").click();
        await page.locator("[data-testid=confirm]").click();
        await until(
          (shard) =>
            document.querySelector(`[data-testid=move][data-shard="${shard}"]`) !== null &&
            document.querySelector("[data-testid=run]")?.getAttribute("data-state") === "running",
          first!.shard,
        );
        await page.locator("[data-action=pause]").click();
        await page.locator("[data-testid=confirm]").click();
        await until(
          () => document.querySelector("[data-testid=run]")?.getAttribute("data-state") === "pausing",
          null,
        );
      } finally {
        await held.release();
      }
      // The move under way ends (moved); no other starts.
      await until(
        () => document.querySelector("[data-testid=run]")?.getAttribute("data-state") === "paused",
        null,
      );
      await until(
        (shard) =>
          document.querySelector(`[data-testid=move-ended][data-shard="${shard}"][data-outcome=moved]`) !==
          null,
        first!.shard,
      );
      const state = (await (await fetch(`${dashboard.origin}/api/state`)).json()) as DashboardSnapshot;
      expect(state.run).toMatchObject({ state: "paused", done: 1, total: planned.length });
      // The moves left are on the page: resume makes exactly those.
      expect(state.run!.left.map((m) => m.shard)).toEqual(rest.map((m) => m.shard));
      const left = await page.locator("[data-testid=run-left]").textContent();
      for (const m of rest) expect(left).toContain(m.shard);
      for (const m of rest) expect(state.history.some((h) => h.shard === m.shard)).toBe(false);
      await page.locator("[data-action=resume]").click();
      await page.locator("[data-testid=confirm]").click();
      await until(
        () => document.querySelector("[data-testid=run]")?.getAttribute("data-state") === "done",
        null,
        120_000,
      );
      await until(
        (moves) =>
          moves.every(
            (m) =>
              document.querySelector(
                `[data-testid=move-ended][data-shard="${m.shard}"][data-outcome=moved]`,
              ) !== null &&
              document.querySelector(
                `[data-testid=database][data-name="${m.to}"] [data-testid=shard][data-key="${m.shard}"]`,
              ) !== null,
          ),
        planned,
      );
      await screenshot(page, "dashboard-balanced");
      // Every row seeded is at its shard's new owner, once.
      for (const m of planned) expect((await rowsPerShard(urls[keyOf(m.to)]))[m.shard]).toBe(20);
    },
    patient(180_000),
  );

  it("no page, answer or event carries a password or a connection string", async () => {
    const html = await page.content();
    const state = await (await fetch(`${dashboard.origin}/api/state`)).text();
    for (const text of [html, state, streamed, dashboard.stderr()]) {
      expect(text).not.toContain(PASSWORD);
      expect(text).not.toMatch(/postgres(ql)?:\/\//);
    }
    // The stream carried every state the tests saw: the move, the database down, the run.
    expect(streamed.includes('"kind":"down"')).toBe(true);
    expect(streamed.includes('"outcome":"moved"')).toBe(true);
  });
});
