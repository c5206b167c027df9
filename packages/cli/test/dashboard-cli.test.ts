// `shardkit dashboard` at its edges, over HTTP: bad input refused with clear messages before anything
// is read, a database unreachable at start shown down, the token required of every request when
// one is set, and actions refused unless allowed.
import { writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { MAIN_PORT } from "@shardkit/test-db";
import { eventually } from "@shardkit/vitest-config/eventually";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DashboardSnapshot } from "../src/index.js";
import { type RunningDashboard, startDashboardCli } from "./browser.js";
import { configFile, SLOW, scratch, shardkit, testDatabases } from "./cli.js";

const TOKEN = "t0ken-for-the-dashboard-test-4e1b";
const ROLE = "ghost_role_dash_cli";
const { urls } = testDatabases("dashcli", { a: MAIN_PORT });
let config = "";

beforeAll(() => {
  config = configFile("dashcli", [
    { group: 0, member: 0, url: urls.a },
    // A database nobody listens on: the dashboard starts anyway and shows it down.
    { group: 0, member: 1, url: "postgresql://postgres:hunter2-secret@127.0.0.1:1/nowhere" },
    // A role the server does not know: its error names the role, which no answer may carry.
    { group: 0, member: 2, url: urls.a.replace("postgresql://postgres@", `postgresql://${ROLE}:pw@`) },
  ]);
});

describe("shardkit dashboard: bad input", () => {
  it("refuses a configuration that does not parse, a port taken, another address without a token, a short token, actions without tables", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = String((taken.address() as { port: number }).port);
    const bad = join(scratch, "dashcli-bad.json");
    writeFileSync(bad, "{ not json");
    try {
      const runs = await Promise.all([
        shardkit(["dashboard", "--config", `${config}.missing`]),
        shardkit(["dashboard", "--config", bad]),
        shardkit(["dashboard", "--config", config, "--port", port]),
        shardkit(["dashboard", "--config", config, "--host", "0.0.0.0", "--port", "0"]),
        shardkit(["dashboard", "--config", config, "--token", "short", "--port", "0"]),
        shardkit(["dashboard", "--config", config, "--port", "70000"]),
        shardkit(["dashboard", "--config", config, "--port", "0", "--allow-actions"]),
      ]);
      for (const run of runs) expect(run.code).toBe(2);
      const [missing, notJson, inUse, open, short, range, noTables] = runs.map((r) => r.stderr);
      expect(missing).toContain("cannot read the configuration file");
      expect(notJson).toContain("is not JSON");
      expect(inUse).toContain(`cannot listen on 127.0.0.1:${port}: the port is taken`);
      expect(open).toContain("listening beyond this machine needs a token");
      expect(short).toContain("--token: at least 16 characters");
      expect(range).toContain("--port: expected a port, 0..65535");
      expect(noTables).toContain("--allow-actions: list every table of yours holding shard rows");
    } finally {
      taken.close();
    }
  });
});

describe("shardkit dashboard with a token", () => {
  let dashboard: RunningDashboard;
  beforeAll(async () => {
    dashboard = await startDashboardCli(["--config", config, ...SLOW], {
      SHARDKIT_DASHBOARD_TOKEN: TOKEN,
    });
  });
  afterAll(async () => {
    if (dashboard) expect(await dashboard.stop()).toBe(0);
  });

  it("prints its address with the token, and names a database that does not answer at start", () => {
    expect(dashboard.url).toBe(`${dashboard.origin}/?token=${TOKEN}`);
    expect(dashboard.stderr()).toMatch(
      /127\.0\.0\.1:1\/nowhere does not answer \(.+\); its column shows it down/,
    );
    expect(dashboard.stderr()).not.toContain("hunter2-secret");
    expect(dashboard.stderr()).toContain('role "***" does not exist');
    expect(dashboard.stderr()).not.toContain(ROLE);
  });

  it("answers 401 to every request without the token, or with a wrong one", async () => {
    const wrong = { authorization: "Bearer not-the-token-at-all-000000" };
    const refused = await Promise.all([
      fetch(`${dashboard.origin}/`),
      fetch(`${dashboard.origin}/?token=wrong-token-0000000000`),
      fetch(`${dashboard.origin}/api/state`, { headers: wrong }),
      fetch(`${dashboard.origin}/api/events`),
      fetch(`${dashboard.origin}/assets/app.js`),
      fetch(`${dashboard.origin}/api/actions/plan`, {
        method: "POST",
        headers: { ...wrong, "content-type": "application/json", "x-shardkit-action": "plan" },
        body: "{}",
      }),
    ]);
    for (const response of refused) expect(response.status).toBe(401);
    expect(await refused[0]!.text()).toContain("not authorised");
  });

  it("the printed address sets a cookie and leaves the URL; the token as a bearer works too", async () => {
    const first = await fetch(dashboard.url, { redirect: "manual" });
    expect(first.status).toBe(303);
    expect(first.headers.get("location")).toBe("/");
    const cookie = first.headers.get("set-cookie")!;
    expect(cookie).toMatch(/HttpOnly; SameSite=Strict/);
    // The cookie is this dashboard's (its port in its name), and holds no token.
    const port = new URL(dashboard.origin).port;
    expect(cookie.startsWith(`shardkit_dashboard_${port}=`)).toBe(true);
    expect(cookie).not.toContain(TOKEN);
    const page = await fetch(`${dashboard.origin}/`, { headers: { cookie: cookie.split(";")[0]! } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<html");
    const state = await fetch(`${dashboard.origin}/api/state`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(state.status).toBe(200);
    const snapshot = (await state.json()) as DashboardSnapshot;
    const down = snapshot.databases.find((d) => d.name === "127.0.0.1:1/nowhere");
    expect(down).toMatchObject({ up: false });
    expect(snapshot.problems.some((p) => p.kind === "down")).toBe(true);
    expect(JSON.stringify(snapshot)).not.toContain("hunter2-secret");
    expect(JSON.stringify(snapshot)).not.toContain(ROLE);
    // HEAD of the event stream answers, and subscribes nothing.
    const head = await fetch(`${dashboard.origin}/api/events`, {
      method: "HEAD",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(head.status).toBe(200);
  });

  it("holds at most 16 event streams per client address, and a stream closed frees its place", async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const events = (signal: AbortSignal) =>
      fetch(`${dashboard.origin}/api/events`, { headers: auth, signal });
    const held = Array.from({ length: 16 }, () => new AbortController());
    try {
      const open = await Promise.all(held.map((c) => events(c.signal)));
      for (const response of open) expect(response.status).toBe(200);
      const refused = await fetch(`${dashboard.origin}/api/events`, { headers: auth });
      expect(refused.status).toBe(429);
      expect(await refused.text()).toContain("too many event streams from 127.0.0.1: 16 are open");
      held[0]!.abort();
      const extra = new AbortController();
      held.push(extra);
      await eventually("the place of a closed stream is given back", async () => {
        const again = await events(extra.signal);
        if (again.status === 200) return true;
        await again.body?.cancel();
        return false;
      });
    } finally {
      for (const c of held) c.abort();
    }
  });

  it("refuses actions unless --allow-actions, and any action not naming itself or from another origin", async () => {
    const auth = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
    const post = (name: string, headers: Record<string, string>) =>
      fetch(`${dashboard.origin}/api/actions/${name}`, {
        method: "POST",
        headers: { ...auth, ...headers },
        body: "{}",
      });
    const [off, unnamed, foreign, sandboxed] = await Promise.all([
      post("pause", { "x-shardkit-action": "pause" }),
      post("pause", {}),
      post("pause", { "x-shardkit-action": "pause", origin: "http://evil.example" }),
      post("plan", { "x-shardkit-action": "plan", origin: "null" }),
    ]);
    expect(off.status).toBe(403);
    expect(((await off.json()) as { message: string }).message).toContain("--allow-actions");
    expect(unnamed.status).toBe(400);
    expect(foreign.status).toBe(403);
    expect(sandboxed.status).toBe(403);
  });
});
