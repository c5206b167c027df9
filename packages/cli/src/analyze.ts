import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { analyzeShardKey, type ShardKeySample, type ShardKeyScorecard } from "@shardkit/selector";
import { SampleFileError, UsageError } from "./errors.js";
import { count, percent, table } from "./format.js";

export interface AnalyzeOptions {
  /** A JSON-lines file of sampled operations (one object per line); `-` reads `stdin`. */
  file: string;
  /** Candidate keys, each `path` or `label=path` (a dotted field path into each operation). */
  keys: readonly string[];
  /** Members to spread keys over: a count (members 0..n-1) or the member numbers. */
  members: number | readonly number[];
  /** Heaviest keys listed per candidate. Default 10. */
  top?: number;
  /** The field holding an operation's cost (bytes, rows, ms). Default `cost`; absent: 1. */
  cost?: string;
  /** The field holding `"read"` or `"write"`. Default `op`; absent: read. */
  op?: string;
  /** The field naming the row (entity) an operation is about, for key stability. Without it stability is not measured. */
  entity?: string;
  /** The text of the file when `file` is `-`. */
  stdin?: string;
  cwd?: string;
}

/** Key stability: whether the candidate key of a row (entity) stays the same over the sample. */
export interface KeyStability {
  /** Entities seen with a key value. */
  entities: number;
  /** Entities seen with two or more different key values: each would have to move to another shard. */
  changed: number;
  /** `1 - changed / entities`. */
  stableShare: number;
}

export interface CandidateReport {
  /** The label (`label=path`) or the path. */
  key: string;
  path: string;
  scorecard: ShardKeyScorecard;
  /** `null` without `entity`. */
  stability: KeyStability | null;
}

export interface AnalyzeReport {
  ok: true;
  file: string;
  operations: number;
  writes: number;
  members: number[];
  candidates: CandidateReport[];
}

/** A value at a dotted path (`customer.id`); a field whose name has a dot is found whole first. */
function at(value: unknown, path: string): unknown {
  if (value === null || typeof value !== "object") return undefined;
  const record = value as Record<string, unknown>;
  if (path in record) return record[path];
  const dot = path.indexOf(".");
  if (dot < 0) return undefined;
  return at(record[path.slice(0, dot)], path.slice(dot + 1));
}

type KeyValue = string | number;

function keyValue(value: unknown, line: number, path: string): KeyValue | null {
  if (value === null || value === undefined || value === "") return null;
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isFinite(value)) return value;
  throw new SampleFileError(
    `line ${line}: ${path} must be a string, a number, null or a list of them, got ${Array.isArray(value) ? "a nested list" : typeof value}`,
    { line },
  );
}

/** The candidate's key and the other keys the operation touches: a list's first value is its key. */
function keysOf(value: unknown, line: number, path: string): { key: KeyValue | null; touches?: KeyValue[] } {
  if (!Array.isArray(value)) return { key: keyValue(value, line, path) };
  const values = value.map((v) => keyValue(v, line, path)).filter((v): v is KeyValue => v !== null);
  const [key = null, ...rest] = [...new Set(values)];
  return rest.length > 0 ? { key, touches: rest } : { key };
}

function parseCandidates(specs: readonly string[]) {
  const issues: string[] = [];
  const candidates = specs.map((spec) => {
    const eq = spec.indexOf("=");
    const label = (eq >= 0 ? spec.slice(0, eq) : spec).trim();
    const path = (eq >= 0 ? spec.slice(eq + 1) : spec).trim();
    if (label === "" || path === "")
      issues.push(`--key ${JSON.stringify(spec)}: expected path or label=path`);
    return { label, path };
  });
  if (candidates.length === 0)
    issues.push("--key: give at least one candidate key, e.g. --key tenantId --key accountId");
  const labels = candidates.map((c) => c.label);
  for (const label of new Set(labels.filter((l, i) => labels.indexOf(l) !== i)))
    issues.push(`--key ${label}: listed twice`);
  if (issues.length > 0) throw new UsageError(issues);
  return candidates;
}

/**
 * The shard-key scorecard (`analyzeShardKey` of `@shardkit/selector`) of several candidate keys
 * over one traffic sample, side by side, on the decision guide's criteria: cardinality, traffic
 * share of the heaviest keys, imbalance by traffic, operations that lose locality, and key
 * stability (measured here, from `entity`: rows whose key value changes within the sample).
 * Longer than 80 lines: reads the samples and scores every candidate key in one pass.
 */
export async function analyze(options: AnalyzeOptions): Promise<AnalyzeReport> {
  const candidates = parseCandidates(options.keys);
  const top = options.top ?? 10;
  if (!(Number.isInteger(top) && top >= 1))
    throw new UsageError([`--top: expected an integer >= 1, got ${top}`]);
  const members =
    typeof options.members === "number"
      ? Array.from({ length: options.members }, (_, i) => i)
      : [...options.members];
  if (
    members.length === 0 ||
    members.length > 64 ||
    new Set(members).size !== members.length ||
    !members.every((m) => Number.isInteger(m) && m >= 0 && m <= 63)
  )
    throw new UsageError([
      `--members: expected a count 1..64 or a list of distinct member numbers 0..63, got ${JSON.stringify(options.members)}`,
    ]);
  const costPath = options.cost ?? "cost";
  const opPath = options.op ?? "op";

  let text: string;
  const file = options.file === "-" ? "(stdin)" : resolve(options.cwd ?? process.cwd(), options.file);
  if (options.file === "-") text = options.stdin ?? "";
  else {
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw new SampleFileError(`cannot read the sample file ${file}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  // One pass over the file, keeping only what the scorecards need.
  const costs: number[] = [];
  const writes: boolean[] = [];
  const entities: (string | null)[] = [];
  const keys = candidates.map(() => [] as { key: KeyValue | null; touches?: KeyValue[] }[]);
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.trim();
    if (raw === "") continue;
    const line = i + 1;
    let op: unknown;
    try {
      op = JSON.parse(raw);
    } catch (error) {
      throw new SampleFileError(`line ${line}: not JSON (${(error as Error).message})`, { line });
    }
    if (op === null || typeof op !== "object" || Array.isArray(op))
      throw new SampleFileError(`line ${line}: expected an object (one operation)`, { line });
    const cost = at(op, costPath) ?? 1;
    if (typeof cost !== "number" || !Number.isFinite(cost) || cost < 0)
      throw new SampleFileError(
        `line ${line}: ${costPath} must be a number >= 0, got ${JSON.stringify(cost)}`,
        {
          line,
        },
      );
    const kind = at(op, opPath) ?? "read";
    if (kind !== "read" && kind !== "write")
      throw new SampleFileError(
        `line ${line}: ${opPath} must be "read" or "write", got ${JSON.stringify(kind)}`,
        {
          line,
        },
      );
    costs.push(cost);
    writes.push(kind === "write");
    if (options.entity !== undefined) {
      const entity = at(op, options.entity);
      entities.push(entity === null || entity === undefined ? null : String(entity));
    }
    candidates.forEach((c, k) => {
      keys[k]!.push(keysOf(at(op, c.path), line, c.path));
    });
  }
  if (costs.length === 0) throw new SampleFileError(`${file}: no operations (one JSON object per line)`);

  const reports = candidates.map((c, k): CandidateReport => {
    const column = keys[k]!;
    function* samples(): Generator<ShardKeySample> {
      for (let i = 0; i < column.length; i++) {
        const { key, touches } = column[i]!;
        yield {
          key,
          ...(touches ? { touches } : {}),
          cost: costs[i]!,
          op: writes[i] ? "write" : "read",
        };
      }
    }
    const scorecard = analyzeShardKey(samples(), { members, top });
    return {
      key: c.label,
      path: c.path,
      scorecard,
      stability: options.entity === undefined ? null : stabilityOf(column, entities),
    };
  });
  return {
    ok: true,
    file,
    operations: costs.length,
    writes: writes.filter(Boolean).length,
    members,
    candidates: reports,
  };
}

function stabilityOf(
  column: readonly { key: KeyValue | null }[],
  entities: readonly (string | null)[],
): KeyStability {
  const CHANGED = Symbol("changed");
  const seen = new Map<string, string | typeof CHANGED>();
  let changed = 0;
  for (let i = 0; i < column.length; i++) {
    const entity = entities[i];
    const key = column[i]!.key;
    if (entity === null || entity === undefined || key === null) continue;
    const value = String(key);
    const before = seen.get(entity);
    if (before === undefined) seen.set(entity, value);
    else if (before !== CHANGED && before !== value) {
      seen.set(entity, CHANGED);
      changed++;
    }
  }
  return {
    entities: seen.size,
    changed,
    stableShare: seen.size > 0 ? 1 - changed / seen.size : 1,
  };
}

/** One criterion of the scorecards: its value per candidate, how it is printed, and which way is better. */
type ScoreRow = {
  label: string;
  values: (number | null)[];
  text: (c: CandidateReport) => string;
  better?: "high" | "low";
};

/** The criteria the candidates `cs` are compared on, in the order they are printed. */
function scoreRows(cs: readonly CandidateReport[]): ScoreRow[] {
  return [
    {
      label: "distinct keys",
      values: cs.map((c) => c.scorecard.cardinality),
      text: (c) => count(c.scorecard.cardinality),
      better: "high",
    },
    {
      label: "heaviest key, traffic share",
      values: cs.map((c) => c.scorecard.top[0]?.share ?? 0),
      text: (c) => {
        const t = c.scorecard.top[0];
        return t ? `${percent(t.share)} (${t.key.length > 16 ? `${t.key.slice(0, 15)}…` : t.key})` : "-";
      },
      better: "low",
    },
    {
      label: `top ${cs[0]?.scorecard.top.length ?? 0} keys, traffic share`,
      values: cs.map((c) => c.scorecard.topShare),
      text: (c) => percent(c.scorecard.topShare),
      better: "low",
    },
    {
      label: "imbalance by traffic",
      values: cs.map((c) => c.scorecard.load.imbalance),
      text: (c) => `${c.scorecard.load.imbalance.toFixed(2)} (member ${c.scorecard.load.hottestMember})`,
      better: "low",
    },
    {
      label: "imbalance by write traffic",
      values: cs.map((c) => c.scorecard.load.writeImbalance),
      text: (c) => c.scorecard.load.writeImbalance.toFixed(2),
      better: "low",
    },
    {
      label: "imbalance by keys (rows)",
      values: cs.map((c) => c.scorecard.load.keyImbalance),
      text: (c) => c.scorecard.load.keyImbalance.toFixed(2),
    },
    {
      label: "operations losing locality",
      values: cs.map((c) => c.scorecard.locality.lostShare),
      text: (c) => percent(c.scorecard.locality.lostShare),
      better: "low",
    },
    {
      label: "  spanning members",
      values: cs.map((c) => c.scorecard.locality.crossMember / Math.max(1, c.scorecard.operations)),
      text: (c) => percent(c.scorecard.locality.crossMember / Math.max(1, c.scorecard.operations)),
    },
    {
      label: "  without the key (fan out)",
      values: cs.map((c) => c.scorecard.locality.keyless / Math.max(1, c.scorecard.operations)),
      text: (c) => percent(c.scorecard.locality.keyless / Math.max(1, c.scorecard.operations)),
    },
    {
      label: "key stability",
      values: cs.map((c) => c.stability?.stableShare ?? null),
      text: (c) =>
        c.stability
          ? `${c.stability.changed === 0 ? "100%" : `${(c.stability.stableShare * 100).toFixed(2)}%`} (${count(c.stability.changed)} of ${count(c.stability.entities)} changed)`
          : "n/a (--entity)",
      better: "high",
    },
  ];
}

/** The scorecards for people: one column per candidate, one row per criterion, `*` on the best value of a row. */
export function renderAnalyze(report: AnalyzeReport): string {
  const cs = report.candidates;
  const body = scoreRows(cs).map((row) => {
    const present = row.values.filter((v): v is number => v !== null);
    const best =
      row.better && present.length > 1 && new Set(present).size > 1
        ? row.better === "high"
          ? Math.max(...present)
          : Math.min(...present)
        : undefined;
    return [
      row.label,
      ...cs.map((c, i) => `${row.text(c)}${best !== undefined && row.values[i] === best ? " *" : ""}`),
    ];
  });
  const head = `${count(report.operations)} operations (${count(report.writes)} writes) over ${report.members.length} members`;
  return `${head}\n${table(["CRITERION", ...cs.map((c) => c.key)], body)}\n* best of the candidates on that line\n`;
}
