// The dashboard's view of atomic actions in doubt: the same read as `shardkit status` (in-doubt.ts
// of the CLI), every `refreshMs`, turned into problems: a warning per database with prepared
// transactions of atomic actions past their coordinator's lease (no router's recovery concluded
// them; their rows stay locked), an error for those no recovery can conclude from this
// configuration. Those within the lease are actions in flight: counted in the warning, not a problem alone.
import type { Database } from "@shardkit/prisma";
import type { RawClient } from "../config.js";
import { duration, plural } from "../format.js";
import { type InDoubtReport, readInDoubt } from "../in-doubt.js";
import type { Names } from "./names.js";
import type { DashboardProblem } from "./types.js";

export class InDoubtPiece {
  private report: InDoubtReport | null = null;

  constructor(
    private readonly databases: readonly Database<RawClient>[],
    private readonly timeoutMs: number,
    private readonly names: Names,
  ) {}

  /** Reads every database's prepared transactions (changes nothing). */
  async read(): Promise<void> {
    this.report = await readInDoubt(this.databases, { timeoutMs: this.timeoutMs, dryRun: true });
  }

  /** The problems of the last read. */
  problems(): DashboardProblem[] {
    const report = this.report;
    if (!report) return [];
    const problems: DashboardProblem[] = [];
    for (const d of report.databases) {
      const physical = this.databases.find((p) => p.name === d.database);
      const database = physical ? this.names.of(physical) : this.names.clean(d.database);
      const own = report.transactions.filter((t) => t.database === d.database);
      const undecidable = own.filter((t) => t.decision === "unknown").length;
      if (undecidable > 0)
        problems.push({
          level: "error",
          kind: "in-doubt",
          database,
          text: `${plural(undecidable, "atomic action")} in doubt on ${database} whose deciding database is not in this configuration: recover them with one that lists it`,
        });
      if (d.commit + d.rollBack > 0)
        problems.push({
          level: "warning",
          kind: "in-doubt",
          database,
          text: `${plural(d.count, "atomic action")} in doubt on ${database} (the oldest ${duration(d.oldestMs)}; ${d.commit + d.rollBack} past the ${duration(report.leaseMs)} lease, their rows locked): \`shardkit recover\` concludes them`,
        });
    }
    return problems;
  }
}
