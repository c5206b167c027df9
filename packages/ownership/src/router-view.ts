// The router's view of the partition map: its last copy of every database's records (a database that
// does not answer keeps its last one, never read as having none), read and applied to the registry
// shard by shard (placement.ts decides each shard), with the shards whose calls routing refuses and
// why, and the shards whose owner records them fenced (their writes wait in the router: router-wait.ts).
import { ShardIdentifier } from "@shardkit/id";
import type { Database, ShardClient, ShardRegistry } from "@shardkit/prisma";
import { databaseIdentities } from "@shardkit/prisma/internal";
import { scatter } from "@shardkit/scatter";
import { DatabasesUnansweredError, InvalidMapError } from "./errors.js";
import type { RouterRepairs } from "./heal.js";
import type { MapInstall } from "./install.js";
import { type OwnershipRow, resolveOwners } from "./owners.js";
import { bounded, lastLine, mapRaw } from "./raw.js";
import type { Signals } from "./signals.js";
import { MAP_RECORDS_SQL } from "./sql.js";

/** A record as the router reads it: with, for a fenced shard, whether the lease of the move holding the fence lapsed. */
export type Row = OwnershipRow & { lapsed?: boolean | null };

/** A router's idle look at a database: the map's version, then the digest of its records (`shardkit_map_check`). */
const CHECK_SQL = `SELECT version, digest FROM shardkit_map_check()`;

/** Why routing refuses a shard's calls: its records cannot be right, or its database has not answered yet. */
export type Problem =
  | { kind: "records"; issues: string[] }
  | { kind: "unanswered"; database: Database<ShardClient>; error: string };

/** A router's copy of the records, and what routing makes of it. */
export class RouterView<Client extends ShardClient> {
  /** The last rows read from each database (kept while it does not answer). */
  readonly rows = new Map<Database<Client>, Row[]>();
  /** When (in the order reads started) each database's rows in `rows` were read: an older read never replaces a newer. */
  private readonly readAt = new Map<Database<Client>, number>();
  private reads = 0;
  /** Why each database's latest read failed (absent: it answered). */
  readonly silent = new Map<Database<Client>, string>();
  /** Shards whose calls routing refuses, and why. */
  readonly problems = new Map<number, Problem>();
  /** Shards whose owner (where routing sends them) records them fenced: their writes wait in the router. */
  readonly fenced = new Set<number>();
  /** What each database says it is (`server:port/database`), once it has answered. */
  identities = new Map<Database<Client>, string>();
  /** When the last read was applied, or the last check found nothing changed (`performance.now()`). */
  lastRead = 0;
  /** The digest of each database's records in `rows` (see `RECORDS_DIGEST`). */
  private readonly digests = new Map<Database<Client>, string>();
  /**
   * Shards whose owner's epoch a read found behind the one routing uses (a record set back: a
   * restored backup, a hand edit), with that owner and epoch: refused until a later read finds the
   * same, then adopted.
   */
  private readonly setBack = new Map<number, { owner: Database<Client>; epoch: number }>();
  /** The map's version each database gave at the last look (`shardkit_map_check`). */
  private readonly versions = new Map<Database<Client>, string>();
  /**
   * The database idle ticks look at (its index among the settled ones): chosen at random, so that
   * routers spread over the fleet, and kept, so that its connection stays open; the next one when
   * it does not answer.
   */
  private home = Math.floor(Math.random() * 1024);
  /** When the next sweep is due (`performance.now()`): every database looked at. */
  private sweepAt = 0;
  /** When each database last answered a read or a look (`performance.now()`). */
  private readonly seenAt = new Map<Database<Client>, number>();
  /** Databases with a glance under way (see `glance`). */
  private readonly glancing = new Set<Database<Client>>();

  constructor(
    private readonly registry: ShardRegistry<Client>,
    /** How long one read waits for each database (ms). */
    private readonly timeoutMs: number,
    /** How often every database is looked at, whatever the versions say (ms). */
    private readonly sweepMs: number,
    private readonly install: MapInstall<Client>,
    private readonly repairs: RouterRepairs<Client>,
    private readonly signals: Signals,
  ) {}

  /**
   * Reads the records of `only` (default: every database) and applies the map they make with the others' last records.
   * Longer than 80 lines: one read applied whole: records, problems, set-backs and signals together.
   */
  async read(only?: readonly Database<Client>[]): Promise<void> {
    // The open's first read: the records its set-up read, where they make it (see `MapInstall.seeds`).
    const seeds = only ? undefined : this.install.seeds();
    for (const [physical, { rows, digest }] of seeds ?? []) {
      this.rows.set(physical, rows);
      this.digests.set(physical, digest);
      this.readAt.set(physical, ++this.reads);
      this.seenAt.set(physical, performance.now());
    }
    const result = await scatter(
      (only ?? this.registry.databases).filter((p) => !seeds?.has(p)),
      async (physical) => {
        // A database read for the first time gets shardkit's functions first (it was down at open).
        if (!this.install.has(physical)) await this.install.functionsIn(physical);
        const at = ++this.reads;
        const read = await mapRaw(physical).$queryRawUnsafe<(Row & { digest: string })[]>(MAP_RECORDS_SQL);
        const rows = read.filter((r) => r.shard !== null).map(({ digest: _, ...row }) => row);
        return { at, rows, digest: read[0]!.digest };
      },
      { policy: "partial", targetTimeoutMs: this.timeoutMs, key: (p) => p.name },
    );
    for (const outcome of result.outcomes) {
      if (outcome.status !== "fulfilled") continue;
      this.silent.delete(outcome.target);
      // Reads overlap (a full refresh, the poll of held writes): a read that started before the one
      // these rows came from must not put older records back.
      this.seenAt.set(outcome.target, performance.now());
      if ((this.readAt.get(outcome.target) ?? 0) > outcome.value.at) continue;
      this.readAt.set(outcome.target, outcome.value.at);
      this.rows.set(outcome.target, outcome.value.rows);
      this.digests.set(outcome.target, outcome.value.digest);
    }
    this.unanswered(result.missing);
    if (!only && this.identities.size < this.registry.databases.length) {
      for (const [p, id] of await databaseIdentities(this.registry, { timeoutMs: this.timeoutMs })) {
        this.identities.set(p, id);
      }
    }
    // Every database answered (now or before) and none is silent: the shards no database records
    // can be recorded (an open that found a database down could not); announced once made.
    if (
      !this.install.recorded &&
      this.identities.size === this.registry.databases.length &&
      this.rows.size === this.registry.databases.length &&
      this.silent.size === 0
    ) {
      await bounded(this.install.deadline(), () => this.install.recordUnrecorded()).catch(() => {});
      if (this.install.recorded) return this.read();
    }
    const changed: ShardIdentifier[] = [];
    this.problems.clear();
    const { placements } = resolveOwners(this.registry, this.rows, this.identities);
    for (const { shard, owner, epoch, state, configured, issues } of placements) {
      const problems = [...issues];
      const back = owner !== null && epoch !== null && epoch < this.registry.epochOf(shard);
      const agreed = back && issues.length === 0 && this.agrees(shard, owner, epoch);
      // A set-back is noted only from a read that found nothing else wrong with the shard: two clean
      // reads agreeing are what adopts it.
      if (back && !agreed && issues.length === 0) problems.push(this.noteSetBack(shard, owner, epoch));
      if (!back || issues.length > 0) this.setBack.delete(shard.bits);
      if (owner === null && state === "unknown" && !this.rows.has(configured)) {
        this.problems.set(shard.bits, {
          kind: "unanswered",
          database: configured as Database<ShardClient>,
          error: this.silent.get(configured) ?? "not read yet",
        });
        continue;
      }
      if (owner === null && state === "unknown")
        problems.push(`no database owns it by the records read (${describeRecords(this.rows, shard)})`);
      if (owner === null && state === "unrecorded" && this.install.recorded)
        problems.push(
          `${configured.name} has no record of it, though the map recorded every shard: its record was deleted`,
        );
      if (problems.length > 0) {
        this.problems.set(shard.bits, { kind: "records", issues: problems });
        continue;
      }
      if (owner === null || epoch === null) continue; // unrecorded before any open recorded it: the configuration holds
      if (this.registry.databaseOf(shard) === owner && this.registry.epochOf(shard) === epoch) continue;
      this.registry.assign(shard, owner, epoch, agreed);
      changed.push(shard);
    }
    this.fenced.clear();
    for (const shard of this.registry.shards) {
      const owner = this.registry.databaseOf(shard);
      const row = this.rowOf(owner, shard);
      if (row?.state === "fenced") this.fenced.add(shard.bits);
      // Armed for a move whose mover stopped (its lease lapsed): no write is refused, so no refusal
      // will lead a router here; the read gives it back (its writes stop noting their keys).
      if (row?.state === "owned" && row.peer !== null && row.lapsed) void this.repairs.giveBack(owner, shard);
    }
    this.lastRead = performance.now();
    this.signals.emit({
      type: "refresh",
      changed,
      missing: result.missing.map((m) => m.target.name),
      problems: [...this.problems.keys()].map((bits) => ShardIdentifier.fromBits(bits)),
    });
  }

  /**
   * The timer's read, which costs one statement per tick however many databases the map has, while
   * nothing changes. Every change of records is announced in every database (the map's version,
   * moved on after it commits: `PartitionMap.announce`), so the tick looks at one database, this
   * router's `home` (`shardkit_map_check`: its version, and its records' digest). When it gives
   * another version or digest than at its last look, or one is due every `sweepMs` (changes made without an
   * announcement: by hand, by a changer that died before announcing), every database is looked at
   * (`sweep`). Databases that hold a shard in motion (whose lease may lapse as time passes) or did
   * not answer last time are read in full every tick. While any shard's records cannot be right,
   * or some database has not answered yet, everything is read. Shards no database records yet (the
   * open found a database down) are recorded by the first read that finds every database answering,
   * this router's or another's: the recording is announced like any change.
   */
  async check(): Promise<void> {
    const databases = this.registry.databases;
    if (
      this.problems.size > 0 ||
      this.identities.size < databases.length ||
      this.digests.size < databases.length
    )
      return this.read();
    const moving = databases.filter((p) => this.silent.has(p) || this.inMotion(p));
    const settled = databases.filter((p) => !moving.includes(p));
    if (performance.now() >= this.sweepAt || settled.some((p) => !this.versions.has(p)))
      return this.sweep(moving);
    const looked = settled[this.home % settled.length];
    if (looked) {
      const { unchanged, announced, missing } = await this.look([looked]);
      if (missing.length > 0) this.home++;
      if (!unchanged.has(looked) || announced) return this.sweep(moving);
    }
    if (moving.length > 0) return this.read(moving);
    this.lastRead = performance.now();
    this.signals.emit({ type: "refresh", changed: [], missing: [], problems: [] });
  }

  /**
   * Looks at every settled database (`look`), then reads in full those whose digest changed and
   * those in `moving`.
   */
  private async sweep(moving: readonly Database<Client>[]): Promise<void> {
    this.sweepAt = performance.now() + this.sweepMs;
    const databases = this.registry.databases;
    const { unchanged, missing } = await this.look(databases.filter((p) => !moving.includes(p)));
    // Kept as last read; read in full at the next check.
    for (const m of missing) unchanged.add(m);
    const read = databases.filter((p) => !unchanged.has(p));
    if (read.length > 0) return this.read(read);
    this.lastRead = performance.now();
    this.signals.emit({
      type: "refresh",
      changed: [],
      missing: missing.map((m) => m.name),
      problems: [],
    });
  }

  /**
   * On a call routed to `physical`: when `everyMs` have passed since it last answered a read or a
   * look, looks at it (its records' digest, with the tick's small statement) beside the call, and
   * calls `changed` when its records changed since this router last read them. A switch changes the records of the shard's
   * former owner whether or not its announcement reached this router, so a router that missed one
   * learns of the switch from its first call to the former owner that comes `everyMs` or more after
   * its last look there, one statement later, not at its next sweep. At most one look per database
   * per `everyMs`, however many calls; none without calls.
   */
  glance(physical: Database<Client>, everyMs: number, changed: () => Promise<void>): void {
    if (this.glancing.has(physical)) return;
    if (performance.now() - (this.seenAt.get(physical) ?? 0) < everyMs) return;
    this.glancing.add(physical);
    void (async () => {
      try {
        // Its own records only: the versions stay the ticks' (an announcement moves every
        // database's on, and a look per database called must not read the map once for each).
        const { unchanged, missing } = await this.look([physical], false);
        if (missing.length === 0 && !unchanged.has(physical)) await changed();
      } catch {
        // the next call looks again; a read of the map reports a database that does not answer
      } finally {
        this.glancing.delete(physical);
      }
    })();
  }

  /**
   * Notes that `owner`'s record of `shard` is at `epoch`, behind the epoch routing uses, and says
   * so: the shard is refused until a later read finds the same record (then `agrees`).
   */
  private noteSetBack(shard: ShardIdentifier, owner: Database<Client>, epoch: number): string {
    this.setBack.set(shard.bits, { owner, epoch });
    return `epoch ${epoch} at ${owner.name} is behind epoch ${this.registry.epochOf(shard)} already seen (the record was set back: a restored backup?); if a later read finds it still so, routing takes epoch ${epoch}`;
  }

  /** Whether an earlier read found `shard`'s owner record set back to the same owner and epoch (then it is adopted). */
  private agrees(shard: ShardIdentifier, owner: Database<Client>, epoch: number): boolean {
    const seen = this.setBack.get(shard.bits);
    if (!seen || seen.owner !== owner || seen.epoch !== epoch) return false;
    this.setBack.delete(shard.bits);
    return true;
  }

  /**
   * Asks each of `databases` for the map's version and its records' digest (`shardkit_map_check`),
   * notes the versions (unless `versions` is false), and says which gave the digest of the records last read (`unchanged`),
   * whether any gave another version than at its last look (`announced`: a change somewhere in the
   * fleet), and which did not answer.
   */
  private async look(
    databases: readonly Database<Client>[],
    versions = true,
  ): Promise<{
    unchanged: Set<Database<Client>>;
    announced: boolean;
    missing: Database<Client>[];
  }> {
    const result = await scatter(
      databases,
      async (physical) =>
        (await mapRaw(physical).$queryRawUnsafe<{ version: string; digest: string }[]>(CHECK_SQL))[0]!,
      { policy: "partial", targetTimeoutMs: this.timeoutMs, key: (p) => p.name },
    );
    const unchanged = new Set<Database<Client>>();
    let announced = false;
    for (const outcome of result.outcomes) {
      if (outcome.status !== "fulfilled") continue;
      const { version, digest } = outcome.value;
      this.seenAt.set(outcome.target, performance.now());
      const before = this.versions.get(outcome.target);
      if (versions) {
        if (before !== undefined && before !== version) announced = true;
        this.versions.set(outcome.target, version);
      }
      if (digest === this.digests.get(outcome.target)) unchanged.add(outcome.target);
    }
    this.unanswered(result.missing);
    return { unchanged, announced, missing: result.missing.map((m) => m.target) };
  }

  /** Notes why each database that did not answer a read or a check is silent. */
  private unanswered(
    missing: readonly { target: Database<Client>; reason: string; error?: unknown }[],
  ): void {
    for (const m of missing)
      this.silent.set(
        m.target,
        m.reason === "timeout" ? `no answer in ${this.timeoutMs} ms` : lastLine(m.error),
      );
  }

  /** Whether `physical`'s last records hold a shard armed or fenced for a move (whose lease may lapse as time passes). */
  private inMotion(physical: Database<Client>): boolean {
    return (this.rows.get(physical) ?? []).some(
      (r) => r.state === "fenced" || (r.state === "owned" && r.peer !== null),
    );
  }

  /** This router's last copy of `physical`'s record of `shard`. */
  rowOf(physical: Database<Client>, shard: ShardIdentifier): Row | undefined {
    return this.rows.get(physical)?.find((r) => r.shard === shard.bits);
  }

  /** Throws the typed error of a shard whose calls routing refuses (see `problems`). */
  refuseProblem(shard: ShardIdentifier): void {
    const problem = this.problems.get(shard.bits);
    if (!problem) return;
    if (problem.kind === "records") throw new InvalidMapError(problem.issues, shard);
    throw new DatabasesUnansweredError(
      `shard ${shard.key}: its database has not answered the partition map's read, so who owns it is not known`,
      [{ database: problem.database.name, error: problem.error }],
    );
  }
}

/** The records of a shard, as one line: `a fenced at epoch 2, e incoming at epoch 2`. */
function describeRecords<Client extends ShardClient>(
  rows: ReadonlyMap<Database<Client>, readonly Row[]>,
  shard: ShardIdentifier,
): string {
  const held = [...rows].flatMap(([p, list]) =>
    list.filter((r) => r.shard === shard.bits).map((r) => `${p.name} ${r.state} at epoch ${r.epoch}`),
  );
  return held.length > 0 ? held.join(", ") : "none";
}
