// planBalance: which logical shards to move between databases so that measured load (per capacity)
// evens out. Pure and deterministic: the figures in, a plan out; nothing is read or moved here.
//
// First every shard leaves a draining database (heaviest first, each to the allowed database it
// leaves least loaded). Then, while max/mean is over 1 + threshold, a database over the threshold
// (the most loaded first) gives one shard to another: among the allowed moves, those that lower the
// higher of the two databases' loads by at least `minImprovement` of the mean (or by the shard's
// whole load, when it does not overshoot), the best (see `secondary`). Each such move replaces the
// load of the most loaded of its two databases with two lower ones, so the loads sorted from the top
// only ever decrease: the highest load never grows, and runs on stable load converge (no state comes
// back). A plan moves each shard at most once (each move is judged on the fleet the moves before it
// leave, and runs in that order), never to a database named by `recentMoves`, and never onto a
// draining database; with `drainOnly` it makes the drain moves and nothing else. A shard whose
// load alone exceeds the mean database load is reported as hot and never moved to balance: wherever
// it went, that database would be the most loaded.
import { type Model, readInput, type Shard } from "./input.js";
import type {
  BalanceFigures,
  BalanceFleet,
  BalanceMove,
  BalanceOptions,
  BalancePlan,
  BalanceStop,
  ShardLoads,
} from "./types.js";

/** Of the best improvement: a move within this fraction of it counts as "about as good" (for `secondary: "bytes"`). */
const ABOUT_AS_GOOD = 0.9;
/** Relative to the mean: differences below are rounding, not load. */
const EPS = 1e-9;

/**
 * The plan that evens out measured load over `fleet`'s databases (see `BalancePlan`); throws `BalanceInputError`.
 * Longer than 80 lines: one greedy loop over one state of the fleet; its rules read side by side.
 */
export function planBalance(load: ShardLoads, fleet: BalanceFleet, options?: BalanceOptions): BalancePlan {
  const model = readInput(load, fleet, options);
  const { dbs, shards, settings: s } = model;
  const at = shards.map((x) => x.db);
  const sum = dbs.map(() => 0);
  const size = dbs.map(() => 0);
  const count = dbs.map(() => 0);
  for (const x of shards) {
    sum[x.db]! += x.load;
    size[x.db]! += x.bytes;
    count[x.db]!++;
  }
  const perCap = (d: number) => sum[d]! / dbs[d]!.capacity;
  const total = shards.reduce((t, x) => t + x.load, 0);
  const targets = dbs.flatMap((d, i) => (d.draining ? [] : [i]));
  const targetCap = targets.reduce((t, i) => t + dbs[i]!.capacity, 0);
  const mean = targetCap > 0 ? total / targetCap : 0;
  const before = figures(model, at, mean);

  const moves: BalanceMove[] = [];
  const skipped: BalancePlan["skipped"] = model.unplaced.map((shard) => ({
    shard,
    reason: "measured, but not in fleet.shards: not planned, its load not counted",
  }));
  let bytesLeft = s.maxBytes;
  let stop: BalanceStop | undefined;

  /** By shard index: the databases it left (recently, or earlier in this plan). */
  const left = shards.map((x) => new Set(dbs.flatMap((d, i) => (s.left.get(x.key)?.has(d.name) ? [i] : []))));
  const forbidden = new Map<string, string | undefined>();
  const rule = (x: Shard, d: number): string | undefined => {
    if (!s.allows) return undefined;
    const k = `${x.id.bits}:${d}`;
    if (!forbidden.has(k)) forbidden.set(k, s.allows(x.id, { name: dbs[d]!.name, labels: dbs[d]!.labels }));
    return forbidden.get(k);
  };
  const refusals = (x: Shard, from: number) =>
    targets
      .filter((t) => t !== from)
      .map((t) => `${dbs[t]!.name}: ${rule(x, t)}`)
      .join("; ") || "no database that is not draining";
  // A shard moved again in this plan (a -> b, then b -> c) is moved once, a -> c, in its first move's
  // place (copied once; counted once in the limits), and only when every balancing move of the plan,
  // run in order with the fold, still lowers the higher of its two databases' loads (`folds`): the
  // moves between were judged with the shard on b. Each move's figures are set once the plan is made
  // (`replay`).
  const apply = (j: number, to: number, kind: BalanceMove["kind"], reason: string) => {
    const x = shards[j]!;
    const from = at[j]!;
    sum[from]! -= x.load;
    sum[to]! += x.load;
    size[from]! -= x.bytes;
    size[to]! += x.bytes;
    count[from]!--;
    count[to]!++;
    at[j] = to;
    left[j]!.add(from);
    const earlier = moves.findIndex((m) => m.shard === x.key);
    const first = moves[earlier];
    if (first) {
      const folded = `${reason} (in place of its move to ${dbs[from]!.name}, where that move was)`;
      moves[earlier] = { ...first, to: dbs[to]!.name, reason: folded };
      return;
    }
    bytesLeft -= x.bytes;
    const move = { shard: x.key, from: dbs[from]!.name, to: dbs[to]!.name, kind, load: x.load };
    // Its figures are set once the plan is made (`replay`): a later fold changes those between.
    moves.push({ ...move, bytes: x.bytes, reason, before: { from: 0, to: 0 }, after: { from: 0, to: 0 } });
  };
  /** Whether shard `j`, moved earlier in this plan, may move on to `to` (see `apply`). */
  const folds = (j: number, to: number) => {
    const trial = moves.map((m) => (m.shard === shards[j]!.key ? { ...m, to: dbs[to]!.name } : { ...m }));
    replay(model, trial);
    return trial.every((m) => m.kind !== "balance" || Math.max(m.after.from, m.after.to) < m.before.from);
  };
  const limitHit = (x: Shard): BalanceStop | undefined =>
    moves.length >= s.maxMoves ? "max-moves" : x.bytes > bytesLeft ? "max-bytes" : undefined;
  const limitText = (why: BalanceStop) =>
    why === "max-moves"
      ? `not in this plan: maxMoves (${s.maxMoves}) reached; the next run moves it`
      : `not in this plan: it would pass maxBytes (${fmt(bytesLeft)} bytes left); the next run moves it`;

  // 1. Drain: every shard off a draining database, heaviest first.
  for (const [d, db] of dbs.entries()) {
    if (!db.draining) continue;
    const leaving = shards
      .map((x, j) => ({ x, j }))
      .filter(({ j }) => at[j] === d)
      .sort((a, b) => b.x.load - a.x.load || a.x.bytes - b.x.bytes || a.x.id.bits - b.x.id.bits);
    for (const { x, j } of leaving) {
      const allowed = targets.filter((t) => rule(x, t) === undefined);
      if (allowed.length === 0) {
        skipped.push({
          shard: x.key,
          reason: `${db.name} is draining, but no database may take it (${refusals(x, d)})`,
        });
        continue;
      }
      const why = stop ?? limitHit(x);
      if (why) {
        stop = why;
        skipped.push({ shard: x.key, reason: limitText(why) });
        continue;
      }
      // One it did not leave recently; the lowest load after; at equal load (none recorded yet), the fewest bytes, then shards, per capacity.
      const rank = (t: number) =>
        (left[j]!.has(t) ? [1] : [0]).concat(
          [sum[t]! + x.load, size[t]! + x.bytes, count[t]! + 1].map((v) => v / dbs[t]!.capacity),
        );
      const to = allowed.reduce((best, t) => (lexLess(rank(t), rank(best)) ? t : best));
      apply(
        j,
        to,
        "drain",
        `${db.name} is draining: to ${dbs[to]!.name}, the allowed database it leaves least loaded`,
      );
    }
  }

  // 2. Hot shards: over the mean even alone on the largest database.
  const maxCap = Math.max(0, ...targets.map((t) => dbs[t]!.capacity));
  const isHot = (x: Shard) => mean > 0 && x.load / maxCap > mean * (1 + EPS);
  const hot = shards.flatMap((x, j) => {
    if (!isHot(x)) return [];
    const d = at[j]!;
    const alone = count[d] === 1;
    return [
      {
        shard: x.key,
        load: x.load,
        database: dbs[d]!.name,
        reason: `its load (${fmt(x.load)}) alone exceeds the mean database load (${fmt(mean * maxCap)}): wherever it goes, that database is the most loaded${alone ? `; it is alone on ${dbs[d]!.name} already` : ""}. Isolate it on its own database or pre-split the tenant through the selector`,
      },
    ];
  });

  // 3. Balance.
  const maxRatio = () => Math.max(0, ...dbs.map((_, d) => perCap(d))) / mean;
  const stuck = new Map<string, string>();
  if (!stop) {
    if (s.drainOnly) stop = "drained";
    else if (total === 0) stop = "no-load";
    else if (targets.length === 0) stop = "no-move";
    for (; !stop; ) {
      if (maxRatio() <= 1 + s.threshold + EPS) {
        stop = "balanced";
        break;
      }
      if (moves.length >= s.maxMoves) {
        stop = "max-moves";
        break;
      }
      const sources = targets
        .filter((d) => perCap(d) > (1 + s.threshold) * mean * (1 + EPS))
        .sort((a, b) => perCap(b) - perCap(a) || a - b);
      let blocked: Shard | undefined;
      let chosen: Candidate | undefined;
      for (const src of sources) {
        const found = candidatesFrom(src);
        const affordable = found.filter((c) => c.bytes <= bytesLeft);
        if (affordable.length < found.length) blocked ??= shards[choose(found)!.j];
        chosen = choose(affordable);
        if (chosen) break;
      }
      if (!chosen) {
        stop = blocked ? "max-bytes" : "no-move";
        if (blocked) skipped.push({ shard: blocked.key, reason: limitText("max-bytes") });
        break;
      }
      const { j, to, src } = chosen;
      apply(
        j,
        to,
        "balance",
        `${dbs[src]!.name} is at ${fmt(perCap(src) / mean)}x the mean (over ${fmt(1 + s.threshold)}): to ${dbs[to]!.name}, the higher of the two loads (per capacity) ${fmt(perCap(src))} -> ${fmt(chosen.pairMax)}`,
      );
    }
  }
  if (stop === "no-move") for (const [shard, reason] of stuck) skipped.push({ shard, reason });

  type Candidate = {
    j: number;
    to: number;
    src: number;
    improvement: number;
    pairMax: number;
    bytes: number;
  };
  function candidatesFrom(src: number): Candidate[] {
    const found: Candidate[] = [];
    const need = Math.max(s.minImprovement, EPS) * mean;
    shards.forEach((x, j) => {
      if (at[j] !== src || isHot(x) || x.load === 0) return;
      let anyAllowed = false;
      for (const to of targets) {
        if (to === src || rule(x, to) !== undefined) continue;
        anyAllowed = true;
        if (left[j]!.has(to)) continue; // never back where it came from
        if (moves.some((m) => m.shard === x.key) && !folds(j, to)) continue;
        const source = (sum[src]! - x.load) / dbs[src]!.capacity;
        const target = (sum[to]! + x.load) / dbs[to]!.capacity;
        const pairMax = Math.max(source, target);
        const improvement = perCap(src) - pairMax;
        // Enough: minImprovement of the mean, or the shard's whole load (a small shard that does not overshoot).
        const enough = Math.min(need, (x.load / dbs[src]!.capacity) * (1 - EPS));
        if (improvement >= enough && improvement > EPS * mean)
          found.push({ j, to, src, improvement, pairMax, bytes: x.bytes });
      }
      if (!anyAllowed && targets.length > 1)
        stuck.set(
          x.key,
          `${dbs[src]!.name} is over the threshold, but no other database may take it (${refusals(x, src)})`,
        );
    });
    return found;
  }
  function choose(all: Candidate[]): Candidate | undefined {
    if (all.length === 0) return undefined;
    const tie = (a: Candidate, b: Candidate) => shards[a.j]!.id.bits - shards[b.j]!.id.bits || a.to - b.to;
    if (s.secondary === "none")
      return [...all].sort((a, b) => b.improvement - a.improvement || a.bytes - b.bytes || tie(a, b))[0];
    // The fewest bytes among the moves that bring both databases within the threshold, else among
    // those about as good as the best.
    const within = (1 + s.threshold) * mean * (1 + EPS);
    const best = Math.max(...all.map((c) => c.improvement));
    const enough = all.filter((c) => c.pairMax <= within);
    const pool = enough.length > 0 ? enough : all.filter((c) => c.improvement >= ABOUT_AS_GOOD * best);
    return pool.sort((a, b) => a.bytes - b.bytes || b.improvement - a.improvement || tie(a, b))[0];
  }

  replay(model, moves);
  const after = figures(model, at, mean);
  return {
    moves,
    before,
    after,
    skipped,
    hot,
    stoppedBy: stop ?? "balanced",
    reason: summary(stop ?? "balanced"),
  };

  function summary(why: BalanceStop): string {
    const drained = moves.filter((m) => m.kind === "drain").length;
    const lead = drained > 0 ? `${drained} shard${drained === 1 ? "" : "s"} off draining databases; ` : "";
    const span = `max/mean ${fmt(before.ratio)} -> ${fmt(after.ratio)}`;
    switch (why) {
      case "no-load":
        return `${lead}no load recorded yet`;
      case "drained":
        return `${lead || "no shard on a draining database; "}drain only: no balancing moves`;
      case "balanced":
        return `${lead}${moves.length === drained ? "balanced" : `${moves.length - drained} balancing moves`}: ${span}, within ${fmt(1 + s.threshold)}`;
      case "max-moves":
        return `${lead}maxMoves (${s.maxMoves}) reached at ${span}: run again to go on`;
      case "max-bytes":
        return `${lead}the next move would pass maxBytes, at ${span}: run again to go on`;
      case "no-move":
        return targets.length === 0
          ? `${lead}every database is draining: nowhere to move load to`
          : `${lead}${span}, over ${fmt(1 + s.threshold)}, and no allowed move lowers it by minImprovement${hot.length > 0 ? ` (hot shards: ${hot.map((h) => h.shard).join(", ")})` : ""}`;
    }
  }
}

/** Each move's two loads (per capacity) before and after it, the moves before it made. */
function replay(model: Model, moves: BalanceMove[]): void {
  const index = new Map(model.dbs.map((d, i) => [d.name, i]));
  const sum = model.dbs.map(() => 0);
  for (const x of model.shards) sum[x.db]! += x.load;
  const perCap = (d: number) => sum[d]! / model.dbs[d]!.capacity;
  for (const m of moves) {
    const from = index.get(m.from)!;
    const to = index.get(m.to)!;
    m.before = { from: perCap(from), to: perCap(to) };
    sum[from]! -= m.load;
    sum[to]! += m.load;
    m.after = { from: perCap(from), to: perCap(to) };
  }
}

/** `a` before `b`, element by element (a tie keeps the earlier database: names are in order). */
function lexLess(a: number[], b: number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
}

function figures(model: Model, at: number[], mean: number): BalanceFigures {
  const databases = model.dbs.map((d, i) => {
    let load = 0;
    let bytes = 0;
    let shards = 0;
    model.shards.forEach((x, j) => {
      if (at[j] !== i) return;
      load += x.load;
      bytes += x.bytes;
      shards++;
    });
    const perCapacity = load / d.capacity;
    return {
      name: d.name,
      load,
      capacity: d.capacity,
      perCapacity,
      ratio: mean > 0 ? perCapacity / mean : 0,
      shards,
      bytes,
      draining: d.draining,
    };
  });
  const max = Math.max(0, ...databases.map((d) => d.perCapacity));
  return { max, mean, ratio: mean > 0 ? max / mean : 0, databases };
}

/** A figure for a sentence: up to 3 significant digits. */
function fmt(n: number): string {
  return Number.isFinite(n) ? String(Number(n.toPrecision(3))) : String(n);
}
