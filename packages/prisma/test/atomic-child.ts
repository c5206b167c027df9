// A coordinator process for the atomic-action crash tests: it runs one atomic transfer over three
// databases and, at the point of the protocol it is told (`stopAt`), says so on stdout and waits;
// the parent then SIGKILLs it there.
import { atomicRouter } from "./atomic-world.js";

const { urls, stopAt, from, to, fee, id, amount } = JSON.parse(process.env.ATOMIC_CHILD!) as {
  urls: string[];
  stopAt: "prepared-one" | "prepared-all" | "decided" | "committed";
  from: string;
  to: string;
  fee: string;
  id: string;
  amount: string;
};
const router = atomicRouter(urls);
let prepared = 0;
const stop = () => {
  process.stdout.write(`stopped ${stopAt}\n`);
  setInterval(() => {}, 60_000); // waits here until killed
  return new Promise<void>(() => {});
};
// Exits when its parent goes (its stdin closes): never outlives the test.
process.stdin.on("end", () => process.exit(1));
process.stdin.resume();
await router.db.$action(
  (unit) => {
    const n = BigInt(amount);
    unit.update("wallet", { where: { id: from }, data: { balance: { decrement: n + 1n } } });
    unit.update("wallet", { where: { id: to }, data: { balance: { increment: n } } });
    unit.update("wallet", { where: { id: fee }, data: { balance: { increment: 1n } } });
    for (const [wallet, topic] of [
      [from, "debit"],
      [to, "credit"],
      [fee, "fee"],
    ] as const)
      unit.emit(wallet, { topic, aggregateId: id, payload: { amount } });
  },
  {
    atomic: true,
    atomicProbe: (point) => {
      if (point === "prepared") prepared++;
      if (stopAt === "prepared-one" && point === "prepared" && prepared === 1) return stop();
      if (stopAt === "prepared-all" && point === "prepared" && prepared === 3) return stop();
      if (stopAt === point) return stop();
      return undefined;
    },
  },
);
process.stdout.write("done\n");
await router.close();
process.exit(0);
