// The dashboard bench's browser part: what a user waits for in Chromium, from opening the page of a
// running dashboard until the page shows the whole fleet (every shard's cell on the page). Debian's
// Chromium driven by playwright-core, launched once as the browser tests launch it
// (test/chromium.js); each sample opens a fresh context (nothing cached, its own event stream), as a
// first visit does. Chromium's own launch is not part of any figure.

import { launch } from "../test/chromium.js";

/** Chromium, with one blank page opened and closed (its first context and renderer are made). */
export async function launchChromium() {
  const browser = await launch();
  const context = await browser.newContext();
  await (await context.newPage()).goto("about:blank");
  await context.close();
  return browser;
}

/**
 * From `page.goto(url)` until `shards` cells are on the page (the page's own code puts one per shard,
 * `[data-testid=shard]`; checked on every animation frame), in ms. The context (a new profile in
 * memory) is made before the clock starts and closed after.
 * @param {import("playwright-core").Browser} browser @param {string} url @param {number} shards
 */
export async function pageOpen(browser, url, shards) {
  const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
  try {
    const page = await context.newPage();
    const started = performance.now();
    await page.goto(url);
    await page.waitForFunction((n) => document.querySelectorAll("[data-testid=shard]").length === n, shards, {
      polling: "raf",
      timeout: 120_000,
    });
    return performance.now() - started;
  } finally {
    await context.close();
  }
}

/**
 * The median of `runs` page opens, and every sample in order.
 * @param {import("playwright-core").Browser} browser @param {string} url @param {number} shards
 */
export async function pageMedian(browser, url, shards, runs = 5) {
  const samples = [];
  for (let i = 0; i < runs; i++) samples.push(await pageOpen(browser, url, shards));
  const sorted = [...samples].sort((x, y) => x - y);
  return { ms: sorted[Math.floor(runs / 2)], samples };
}
