// The templates' src/test/test-db.js (tooling/test-db): a server a test stops or freezes is its own
// run's. Two test runs (two processes, neither the other's parent) each make a server of their own at
// once; one stops and freezes its server while the other keeps working on its own, and neither may
// stop or freeze a server the other uses.
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { patient, whyNoClusters } from "../../../tooling/test-db/index.js";

const testDb = new URL("../../../tooling/test-db/index.js", import.meta.url).href;
const work = mkdtempSync(join(tmpdir(), "create-shardkit-test-db-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

// A test run: answers each command from its parent with one message ({ ok } or { error }). "hold"
// stops or freezes its server and answers once it is down, holding it until "release".
const RUN = `
import { ownCluster, shareClusters, withClusterFrozen, withClusterStopped, createDatabase, withClient } from ${JSON.stringify(testDb)};
let own, url, releaseHold, heldDone, shared;
const commands = {
  async make({ base }) {
    own = await ownCluster(base);
    url = await createDatabase(own.port, "sk_own_run");
    await withClient(url, (c) => c.query("CREATE TABLE t (n int)"));
    return { cluster: own.cluster, port: own.port };
  },
  async work({ n }) {
    return withClient(url, async (c) => {
      await c.query("INSERT INTO t SELECT generate_series(1, $1)", [n]);
      return (await c.query("SELECT count(*)::int AS rows FROM t")).rows[0].rows;
    });
  },
  async hold({ how, cluster, port }) {
    let down;
    const isDown = new Promise((resolve) => (down = resolve));
    const hold = () => { down(); return new Promise((resolve) => (releaseHold = resolve)); };
    heldDone = how === "stop" ? withClusterStopped(cluster, port, hold) : withClusterFrozen(cluster, hold);
    await Promise.race([isDown, heldDone]);
    return "held";
  },
  async release() {
    releaseHold();
    await heldDone;
    return "released";
  },
  async use({ cluster }) {
    // Under a key of its own, which names the cluster (as the CLI's pair is shared under "cli").
    shared = await shareClusters("cs-own-use-" + process.pid, { clusters: [cluster], make: async () => {}, drop: async () => {} });
    return "using";
  },
  async unuse() {
    await shared();
    return "unused";
  },
  async drop() {
    await own.drop();
    return "dropped";
  },
};
process.on("message", async ({ command, args }) => {
  try {
    process.send({ ok: await commands[command](args) });
  } catch (error) {
    process.send({ error: String(error.message ?? error) });
  }
});
process.on("disconnect", () => process.exit(0));
`;

type Answer = { ok?: unknown; error?: string };

/** A test run of its own: a child process of this one, with `send(command, args)`. */
function startRun(name: string, signal: AbortSignal) {
  const file = join(work, `${name}.mjs`);
  writeFileSync(file, RUN);
  const child: ChildProcess = fork(file, { signal, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  child.on("error", () => {}); // aborted with the test
  const send = (command: string, args: object = {}) =>
    new Promise<Answer>((resolve) => {
      child.once("message", (answer) => resolve(answer as Answer));
      child.send({ command, args });
    });
  return { child, send };
}

/** Whether a connection to 127.0.0.1:`port` is refused now (nothing listens: the server is down). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"));
  });
}

describe("a server a test stops or freezes (tooling/test-db)", () => {
  it.skipIf(whyNoClusters() !== undefined)(
    "belongs to one run: two runs at once each make their own; one stops and freezes its server while the other works on its own; neither may stop or freeze a server the other uses",
    async ({ signal }) => {
      // A runs in the child, B in another: they are not each other's parent, as two test runs.
      const a = startRun("a", signal);
      const b = startRun("b", signal);
      try {
        const [madeA, madeB] = await Promise.all([
          a.send("make", { base: "cs_own_a" }),
          b.send("make", { base: "cs_own_b" }),
        ]);
        const serverA = madeA.ok as { cluster: string; port: number };
        const serverB = madeB.ok as { cluster: string; port: number };
        expect(serverA.cluster).toBe(`cs_own_a_${a.child.pid}`);
        expect(serverB.port).not.toBe(serverA.port);

        for (const how of ["stop", "freeze"] as const) {
          expect(await a.send("hold", { how, ...serverA })).toEqual({ ok: "held" });
          if (how === "stop") expect(await refused(serverA.port)).toBe(true);
          // B works on its own server meanwhile, and may not touch A's.
          expect(await b.send("work", { n: 10 })).toEqual({ ok: how === "stop" ? 10 : 20 });
          const { error } = await b.send("hold", { how, ...serverA });
          expect(error).toBe(
            `${how === "stop" ? "stopping" : "freezing"} PostgreSQL cluster ${serverA.cluster} refused: another test run uses it (process ${a.child.pid}); a test stops or freezes only a server of its own run (ownCluster)`,
          );
          expect(await a.send("release")).toEqual({ ok: "released" });
        }

        // A server shared with another run (shareClusters, under any key) may not be stopped either.
        expect(await a.send("use", { cluster: serverB.cluster })).toEqual({ ok: "using" });
        expect((await b.send("hold", { how: "stop", ...serverB })).error).toMatch(
          `stopping PostgreSQL cluster ${serverB.cluster} refused: another test run uses it (process ${a.child.pid})`,
        );
        expect(await b.send("work", { n: 1 })).toEqual({ ok: 21 }); // never stopped
        expect(await a.send("unuse")).toEqual({ ok: "unused" });
        expect(await b.send("hold", { how: "stop", ...serverB })).toEqual({ ok: "held" });
        expect(await b.send("release")).toEqual({ ok: "released" });
        expect(await b.send("work", { n: 1 })).toEqual({ ok: 22 });

        expect(await a.send("drop")).toEqual({ ok: "dropped" });
        expect(await b.send("drop")).toEqual({ ok: "dropped" });
        expect(await refused(serverA.port)).toBe(true);
        expect(await refused(serverB.port)).toBe(true);
      } finally {
        for (const run of [a, b]) if (run.child.connected) run.child.disconnect();
      }
    },
    patient(180_000),
  );
});
