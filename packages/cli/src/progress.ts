import { SingleBar } from "cli-progress";

/** A stream progress goes to (stderr): a bar when it is a terminal, plain lines otherwise. */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface Progress {
  /** `value` of `total` done; `detail` says what is happening. Plain mode prints one line per call. */
  update(value: number, detail: string): void;
  setTotal(total: number): void;
  /** Stops the bar (leaving its last state on screen); no-op in plain mode. */
  stop(): void;
}

/**
 * Progress for a long command: on a terminal, a `cli-progress` bar redrawn in place; otherwise
 * (a pipe, a file, CI) one plain line per update, `title [value/total] detail`, so logs read as
 * a sequence of steps. `enabled: false` prints nothing.
 */
export function createProgress(
  stream: ProgressStream,
  options: { title: string; total: number; enabled?: boolean },
): Progress {
  let total = options.total;
  if (options.enabled === false) return { update() {}, setTotal() {}, stop() {} };
  if (!stream.isTTY) {
    return {
      update(value, detail) {
        stream.write(`${options.title} [${value}/${total}] ${detail}\n`);
      },
      setTotal(n) {
        total = n;
      },
      stop() {},
    };
  }
  const bar = new SingleBar({
    stream: stream as NodeJS.WritableStream,
    format: `${options.title} [{bar}] {value}/{total} {detail}`,
    barsize: 24,
    hideCursor: true,
    barCompleteChar: "=",
    barIncompleteChar: "-",
    // The bar is for a person watching: keep redrawing while a step waits.
    fps: 10,
  });
  let started = false;
  return {
    update(value, detail) {
      if (!started) {
        bar.start(total, value, { detail });
        started = true;
      } else bar.update(value, { detail });
    },
    setTotal(n) {
      total = n;
      if (started) bar.setTotal(n);
    },
    stop() {
      if (started) bar.stop();
    },
  };
}
