// Opening partition maps at fleet size: ROUTERS router processes (`test/fleet-opener.ts`, each with a
// client of its own per database, a pool of one, made as `openShards` makes them: the map's
// statements go through that pool, past Prisma's engine) open their maps over DATABASES databases at the
// same moment, on a PostgreSQL server of the bench's own (test/fleet.ts), with the default
// `timeoutMs` (5 s). First over fresh databases (each router finds the set-up to make: the first
// to come makes it, the others find it done), then ROUNDS times over the same databases (an ordinary
// start: nothing to set up), each time after one router opening alone over the same databases: the
// baseline of the same run. Reports how many opened with every database answered, the median and
// slowest open, the CPU a router's open used (median), the server's CPU per open, the set-ups made,
// and the ratio of the fleet's median open to one router's. Run: `pnpm exec tsx bench/scale-open.ts`
// in packages/ownership (BENCH_ROUTERS=16, BENCH_DATABASES=64, BENCH_ROUNDS=3).
import { readFileSync } from "node:fs";
import { FLEET_SERVER, fleetRouters, mapFleet, type RouterOpen, shareFleetServer } from "../test/fleet.js";

const ROUTERS = Number(process.env.BENCH_ROUTERS ?? 16);
const DATABASES = Number(process.env.BENCH_DATABASES ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/**
 * CPU used so far (ms) by the fleet server's ended backends (the postmaster's children, as the kernel
 * counts them once reaped); undefined where it cannot be read (not Linux, another layout).
 */
function serverCpuMs(): number | undefined {
  try {
    const pid = readFileSync(`/var/run/postgresql/15-${FLEET_SERVER.cluster}.pid`, "utf8").split("\n")[0];
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[13]) + Number(fields[14])) * 10; // cutime + cstime, in clock ticks of 10 ms
  } catch {
    return undefined;
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

/** `count` routers opening at once: each open, and the server's CPU for them (their backends ended). */
async function openAt(urls: readonly string[], count: number) {
  const routers = await fleetRouters(urls, count, { FLEET_POOL: "1" });
  const before = serverCpuMs();
  let opens: RouterOpen[];
  try {
    opens = await routers.go();
  } finally {
    routers.kill();
  }
  // The routers' backends end once the routers are gone: then the kernel has counted their CPU.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const after = serverCpuMs();
  return { opens, serverMs: before === undefined || after === undefined ? undefined : after - before };
}

const releaseServer = await shareFleetServer();
const fleet = await mapFleet(DATABASES, "open");
const rows: string[] = [];
const row = (label: string, count: number, run: Awaited<ReturnType<typeof openAt>>) => {
  const { opens, serverMs } = run;
  const ms = opens.map((o) => o.ms);
  const whole = opens.filter((o) => o.ok && o.unanswered === 0 && o.problems === 0).length;
  const failed = opens.filter((o) => !o.ok).map((o) => o.error);
  const cpu = median(opens.map((o) => o.cpuMs ?? 0));
  const server = serverMs === undefined ? "?" : `${Math.round(serverMs / count)} ms`;
  rows.push(
    `| ${label} | ${count} x ${DATABASES} | ${whole} of ${count} | ${(median(ms) / 1000).toFixed(2)} s | ${(Math.max(...ms) / 1000).toFixed(2)} s | ${cpu} ms | ${server} | ${opens.reduce((n, o) => n + o.installs.length, 0)} |`,
  );
  console.error(rows.at(-1), failed.length > 0 ? failed : "");
  return median(ms);
};
const ratios: number[] = [];
try {
  row("fresh databases", ROUTERS, await openAt(fleet.urls, ROUTERS));
  for (let round = 1; round <= ROUNDS; round++) {
    const alone = row(`set up, round ${round}: one router (baseline)`, 1, await openAt(fleet.urls, 1));
    const all = row(
      `set up, round ${round}: every router at once`,
      ROUTERS,
      await openAt(fleet.urls, ROUTERS),
    );
    ratios.push(all / alone);
  }
} finally {
  await fleet.drop();
  await releaseServer();
}
console.log(
  [
    `| ${ROUTERS} routers x ${DATABASES} databases | routers x databases | opened, every database answered | median open | slowest open | router CPU per open (median) | server CPU per open | set-ups made (functions + records) |`,
    "|---|---|---:|---:|---:|---:|---:|---:|",
    ...rows,
    "",
    `${ROUTERS} routers at once / one router alone (median open, each round): ${ratios.map((r) => `${r.toFixed(1)}x`).join(", ")}`,
  ].join("\n"),
);
