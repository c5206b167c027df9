// Opening partition maps at fleet size: ROUTERS router processes (`test/fleet-opener.ts`, each with a
// client of its own per database, a pool of one) open their maps over DATABASES databases at the
// same moment, on a PostgreSQL server of the bench's own (test/fleet.ts), with the default
// `timeoutMs` (5 s). First over fresh databases (each router finds the set-up to make: the first
// to come makes it, the others find it done), then again over the same databases (an ordinary
// start: nothing to set up). Reports, for each, how many opened with every database answered and
// the median and slowest open, and the set-ups made in all. Run: `pnpm exec tsx bench/scale-open.ts`
// in packages/ownership (BENCH_ROUTERS=16, BENCH_DATABASES=64).
import { dropFleetServer, fleetRouters, fleetServer, mapFleet, type RouterOpen } from "../test/fleet.js";

const ROUTERS = Number(process.env.BENCH_ROUTERS ?? 16);
const DATABASES = Number(process.env.BENCH_DATABASES ?? 64);

await fleetServer();
const fleet = await mapFleet(DATABASES, "open");
const rows: string[] = [];
try {
  for (const round of ["fresh databases", "again (set up)"]) {
    const routers = await fleetRouters(fleet.urls, ROUTERS, { FLEET_POOL: "1" });
    let opens: RouterOpen[];
    try {
      opens = await routers.go();
    } finally {
      routers.kill();
    }
    const ms = opens.map((o) => o.ms).sort((a, b) => a - b);
    const whole = opens.filter((o) => o.ok && o.unanswered === 0 && o.problems === 0).length;
    const failed = opens.filter((o) => !o.ok).map((o) => o.error);
    rows.push(
      `| ${round} | ${whole} of ${ROUTERS} | ${(ms[ms.length >> 1]! / 1000).toFixed(1)} s | ${(ms.at(-1)! / 1000).toFixed(1)} s | ${opens.reduce((n, o) => n + o.installs.length, 0)} |`,
    );
    console.error(rows.at(-1), failed.length > 0 ? failed : "");
  }
} finally {
  await fleet.drop();
  await dropFleetServer();
}
console.log(
  [
    `| ${ROUTERS} routers x ${DATABASES} databases | opened, every database answered | median open | slowest open | set-ups made (functions + records) |`,
    "|---|---:|---:|---:|---:|",
    ...rows,
  ].join("\n"),
);
