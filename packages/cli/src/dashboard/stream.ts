// One client's event stream of snapshots, with memory capped whatever the client does: a write the
// client has not taken yet is never followed by another; the snapshots made meanwhile are skipped,
// and the newest is written once the client has read (each snapshot is whole: nothing is lost by
// skipping one). A client that never reads costs at most one snapshot and the socket's buffers.
import type { Writable } from "node:stream";

/** What the streams of a dashboard hold now. */
export interface StreamStats {
  /** Event streams open. */
  open: number;
  /** Bytes written to them that their clients have not taken yet (in this process). */
  unreadBytes: number;
}

export class SnapshotStream {
  private behind = false;
  private ended = false;

  /**
   * `out`: where events are written (a compressor piped to the socket, or the socket);
   * `unread`: the bytes waiting in `out` and what it feeds; `latest`: the newest snapshot's text.
   */
  constructor(
    private readonly out: Writable,
    private readonly unread: () => number,
    private readonly latest: () => string,
    drains: readonly Writable[],
  ) {
    for (const w of drains) w.on("drain", () => this.catchUp());
  }

  /** A new snapshot was made: written now, or, while the client is behind, when it catches up. */
  offer(): void {
    if (this.ended) return;
    if (this.unread() > 0) {
      this.behind = true;
      return;
    }
    this.behind = false;
    this.out.write(`event: snapshot\ndata: ${this.latest()}\n\n`);
  }

  /** Bytes written that the client has not taken. */
  unreadBytes(): number {
    return this.ended ? 0 : this.unread();
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.out.end();
  }

  private catchUp() {
    if (this.behind) this.offer();
  }
}

/** Counts streams per client address, and refuses one past `max`. */
export class StreamLimit {
  private readonly counts = new Map<string, number>();
  constructor(readonly max: number) {}

  /** Takes a place for `client`; false when it has `max` streams open already. */
  take(client: string): boolean {
    const n = this.counts.get(client) ?? 0;
    if (n >= this.max) return false;
    this.counts.set(client, n + 1);
    return true;
  }

  give(client: string): void {
    const n = (this.counts.get(client) ?? 1) - 1;
    if (n <= 0) this.counts.delete(client);
    else this.counts.set(client, n);
  }
}
