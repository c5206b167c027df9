/// <reference lib="dom" />
// `shardkit dashboard` at fleet size in a real browser (Debian's Chromium, driven by playwright-core):
// 1,024 logical shards over four real databases. What a user relies on there: every shard is on the
// page in its database's column (the page shows them all, no paging); a shard moved from the CLI
// shows where it went, and the plan made before the move is marked stale (not offered to run) until
// it is made again; a database stopped turns its column down while the others go on updating; and
// one client address holds at most `--max-streams` event streams, a page past the cap still showing
// the fleet from `/api/state`. Figures at this size (first snapshot, refresh CPU, memory per stream)
// are the benchmark's (bench/dashboard.mjs), not this test's.
import { ShardIdentifier } from "@shardkit/id";
import { MAIN_PORT, patient, withClusterStopped } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import pg from "pg";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DashboardSnapshot } from "../src/index.js";
import * as browser from "./browser.js";
import { configFile, SLOW, shardkit, testDatabases } from "./cli.js";
import { fileServer } from "./clusters.js";
import { seed } from "./seed.js";

const KEYS = ["a", "b", "c", "d"] as const;
type Key = (typeof KEYS)[number];
// a, b and c on the machine's server; d on a cluster of this test's own, which one test stops.
const FLEET = fileServer("skclifleet");
const { names, urls } = testDatabases("fleet", { a: MAIN_PORT, b: MAIN_PORT, c: MAIN_PORT, d: FLEET });
const shown = (key: Key) => `127.0.0.1:${key === "d" ? FLEET.port : MAIN_PORT}/${names[key]}`;

/** 1,024 shards (groups 0..15, members 0..63), dealt round the four databases. */
const SHARDS = Array.from({ length: 1024 }, (_, i) => ({
  key: `${Math.floor(i / 64)}/${i % 64}`,
  home: KEYS[i % 4]!,
}));
/** The shard moved from the CLI: a's, to b. */
const MOVED = "0/0";
const MAX_STREAMS = 2;

let fleetConfig = "";
let dashboard: browser.RunningDashboard;
let chromium: { browser: Browser; close(): Promise<void> };
let page: Page;

/** Waits until `predicate` holds in `on` (evaluated there every 250 ms). */
function until<A>(on: Page, predicate: (arg: A) => boolean, arg: A, timeout = patient(60_000)) {
  return on.waitForFunction(predicate as (arg: unknown) => boolean, arg, { timeout, polling: 250 });
}

/** Every shard cell on `on`: its key, the column it is in and its state. */
function cellsOn(on: Page) {
  return on.evaluate(() =>
    Array.from(document.querySelectorAll("[data-testid=shard]"), (cell) => {
      const own = (cell as HTMLElement).dataset;
      const column = cell.closest("[data-testid=database]") as HTMLElement | null;
      return { key: own.key!, column: column?.dataset.name ?? null, state: own.state! };
    }),
  );
}

async function state(): Promise<DashboardSnapshot> {
  return (await (await fetch(`${dashboard.origin}/api/state`)).json()) as DashboardSnapshot;
}

/** An event stream held open by this process (a client that never reads); its status. */
function openStream() {
  const controller = new AbortController();
  const answer = fetch(`${dashboard.origin}/api/events`, { signal: controller.signal });
  return { answer, close: () => controller.abort() };
}

beforeAll(async () => {
  await seed(urls.a, { [MOVED]: 20 });
  // a's shards busy, the others quiet: the plan moves some of a's.
  for (const key of KEYS)
    await browser.recordLoad(
      urls[key],
      SHARDS.filter((s) => s.home === key).map((s) => ({
        shard: s.key,
        calls: key === "a" ? 400 : 40,
        msPerCall: 2,
      })),
    );
  const config = configFile("fleet", {
    shards: SHARDS.map((s) => {
      const shard = ShardIdentifier.parse(s.key);
      return { group: shard.group, member: shard.member, url: urls[s.home] };
    }),
  });
  // Offline moves (the plan's sizes count Wallet); two event streams per client address.
  const flags = `--refresh 1000 --window 600000 --table Wallet --mode offline --max-streams ${MAX_STREAMS}`;
  dashboard = await browser.startDashboardCli([
    ...flags.split(" "),
    ...["--config", config, "--timeout", String(patient(60_000)), "--allow-actions"],
  ]);
  chromium = await browser.launchChromium();
  page = await chromium.browser.newPage({ viewport: { width: 1600, height: 1000 } });
  await page.goto(dashboard.url);
  await until(page, () => document.body.dataset.connection === "live", null);
  fleetConfig = config;
}, patient(180_000));

afterAll(async () => {
  await chromium?.close();
  if (dashboard) expect(await dashboard.stop()).toBe(0);
});

describe("shardkit dashboard at 1,024 shards in a browser", () => {
  it("shows every one of the 1,024 shards once, in its database's column", async () => {
    await until(page, (n) => document.querySelectorAll("[data-testid=shard]").length === n, SHARDS.length);
    const cells = await cellsOn(page);
    expect(cells).toHaveLength(1024);
    expect(new Set(cells.map((c) => c.key)).size).toBe(1024);
    const expected = new Map(SHARDS.map((s) => [s.key, shown(s.home)]));
    expect(cells.filter((c) => c.column !== expected.get(c.key))).toEqual([]);
    // Each database's column says it is up, with its connections counted.
    for (const key of KEYS) {
      const column = page.locator(`[data-testid=database][data-name="${shown(key)}"]`);
      expect(await column.getAttribute("data-state")).toBe("up");
      expect(await column.locator("[data-testid=connections]").textContent()).toMatch(
        /^\d+ \/ \d+ of \d+ · \d+ active, \d+ idle in transaction/,
      );
    }
    // The hottest shards are a's.
    const hot = await page.locator(`[data-testid=shard][data-key="0/4"]`).getAttribute("data-heat");
    const cold = await page.locator(`[data-testid=shard][data-key="0/5"]`).getAttribute("data-heat");
    expect(Number(hot)).toBe(1);
    expect(Number(cold)).toBeLessThan(0.2);
    await browser.screenshot(page, "dashboard-fleet");
  });

  it("holds at most --max-streams event streams per client; a page past the cap still shows the fleet", async () => {
    // The page holds one; this process takes the other.
    const second = openStream();
    try {
      expect((await second.answer).status).toBe(200);
      const third = openStream();
      const refused = await third.answer;
      expect(refused.status).toBe(429);
      expect(await refused.text()).toContain(`${MAX_STREAMS} are open`);
      // A second tab: its stream is refused, and it shows the fleet from /api/state meanwhile.
      const tab = await chromium.browser.newPage({ viewport: { width: 1600, height: 1000 } });
      try {
        await tab.goto(dashboard.url);
        await until(tab, (n) => document.querySelectorAll("[data-testid=shard]").length === n, SHARDS.length);
        expect(await tab.evaluate(() => document.body.dataset.connection)).toBe("disconnected");
      } finally {
        await tab.close();
      }
    } finally {
      second.close();
    }
    // A stream closed gives its place back.
    await eventually("a stream is accepted again once one closed", async () => {
      const again = openStream();
      const status = (await again.answer).status;
      again.close();
      return status === 200;
    });
  });

  it("a shard moved from the CLI shows where it went; the plan made before is marked stale, then made again", async () => {
    await until(page, () => document.querySelector("[data-testid=plan-move]") !== null, null);
    const before = await state();
    expect(before.plan!.stale).toBeNull();
    expect(before.plan!.moves.length).toBeGreaterThan(0);
    // Making a plan counts each shard's rows: a lock on c's table holds the new plan back, so the
    // page is seen between the move and the new plan.
    const holder = new pg.Client({ connectionString: urls.c });
    await holder.connect();
    await holder.query("BEGIN");
    await holder.query(`LOCK TABLE "Wallet" IN ACCESS EXCLUSIVE MODE`);
    let held = true;
    try {
      const move = ["move", MOVED, "--config", fleetConfig, "--to", names.b];
      const moved = await shardkit([...move, ..."--table Wallet --mode offline".split(" "), ...SLOW], {
        timeoutMs: patient(120_000),
      });
      expect(moved.stderr).not.toContain("failed");
      expect(moved.code).toBe(0);
      await until(
        page,
        ([shard, to]) =>
          document.querySelector(
            `[data-testid=database][data-name="${to}"] [data-testid=shard][data-key="${shard}"]`,
          ) !== null && document.querySelector(".plan-stale")?.textContent?.includes(shard) === true,
        [MOVED, shown("b")] as const,
      );
      // Stale: not offered to run, and refused if asked.
      expect(await page.locator("[data-action=balance]").count()).toBe(0);
      const stale = await state();
      expect(stale.plan!.at).toBe(before.plan!.at);
      expect(stale.plan!.stale).toContain(MOVED);
      const refused = await fetch(`${dashboard.origin}/api/actions/balance`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-shardkit-action": "balance" },
        body: JSON.stringify({ planAt: stale.plan!.at }),
      });
      expect(refused.status).toBe(409);
      await holder.query("ROLLBACK");
      held = false;
    } finally {
      if (held) await holder.query("ROLLBACK");
      await holder.end();
    }
    // The new plan, without anyone pressing Re-plan: made after the move, from where the shard is now.
    await until(
      page,
      () =>
        document.querySelector(".plan-stale") === null &&
        document.querySelector("[data-testid=plan-move]") !== null,
      null,
    );
    const after = await state();
    expect(Date.parse(after.plan!.at)).toBeGreaterThan(Date.parse(before.plan!.at));
    expect(after.plan!.stale).toBeNull();
    expect(after.plan!.moves.every((m) => m.shard !== MOVED || m.from === shown("b"))).toBe(true);
    const cells = await cellsOn(page);
    expect(cells).toHaveLength(1024);
    expect(cells.find((c) => c.key === MOVED)).toMatchObject({ column: shown("b"), state: "owned" });
  });

  it("a database stopped turns its column down, and the other 768 shards go on updating", async () => {
    await withClusterStopped(FLEET.cluster, FLEET.port, async () => {
      await until(
        page,
        (name) =>
          (document.querySelector(`[data-testid=database][data-name="${name}"]`) as HTMLElement | null)
            ?.dataset.state === "down" &&
          document.querySelector(`[data-testid=problem][data-kind=down]`) !== null,
        shown("d"),
      );
      // a records more load meanwhile: its shard's figure changes on the page.
      const cell = `[data-testid=database][data-name="${shown("a")}"] [data-testid=shard][data-key="0/4"]`;
      const load = Number(await page.locator(cell).getAttribute("data-load"));
      await browser.recordLoad(urls.a, [{ shard: "0/4", calls: 4000, msPerCall: 2 }], { agoMs: 20_000 });
      await until(
        page,
        ([selector, old]) =>
          Number((document.querySelector(selector) as HTMLElement | null)?.dataset.load) > old,
        [cell, load] as const,
      );
      // Still every shard on the page; the other columns up.
      expect(await cellsOn(page)).toHaveLength(1024);
      for (const key of ["a", "b", "c"] as const)
        expect(
          await page.locator(`[data-testid=database][data-name="${shown(key)}"]`).getAttribute("data-state"),
        ).toBe("up");
    });
    await until(
      page,
      (name) =>
        (document.querySelector(`[data-testid=database][data-name="${name}"]`) as HTMLElement | null)?.dataset
          .state === "up",
      shown("d"),
    );
  });
});
