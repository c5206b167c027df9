// The parsers of the flags `shardkit`'s commands share: commander calls each with the flag's text.
import { InvalidArgumentError, Option } from "commander";

/** A positive integer (`--timeout`, `--max-moves`...), else commander's usage error naming the flag. */
export const positiveInt = (name: string) => (value: string) => {
  const n = Number(value);
  if (!(Number.isInteger(n) && n > 0)) throw new InvalidArgumentError(`${name} must be a positive integer.`);
  return n;
};

/** A number >= 0 (`--threshold`, `--min-improvement`), else commander's usage error naming the flag. */
export const fraction = (name: string) => (value: string) => {
  const n = Number(value);
  if (!(Number.isFinite(n) && n >= 0)) throw new InvalidArgumentError(`${name} must be a number >= 0.`);
  return n;
};

/** The issues of durations given in ms (`[["--timeout", 5000], ...]`): each set one must be positive. */
export function positiveMsIssues(durations: readonly (readonly [string, number | undefined])[]): string[] {
  return durations
    .filter(([, value]) => value !== undefined && !(Number.isFinite(value) && value > 0))
    .map(([flag, value]) => `${flag}: expected a positive number of ms, got ${value}`);
}

/** A flag given once per value (`--table A --table B`): the values in order. */
export const collect = (value: string, previous: string[] = []) => [...previous, value];

/** A TCP port: 0..65535 (0: any free one). */
export const port = (name: string) => (value: string) => {
  const n = Number(value);
  if (!(/^\d+$/.test(value) && n <= 65535))
    throw new InvalidArgumentError(`${name}: expected a port, 0..65535`);
  return n;
};

/** `--by`: what a shard's load is (`balance`, `drain`, `dashboard`). */
export const byOption = () =>
  new Option("--by <measure>", "what a shard's load is: time in the database, calls or writes (per second)")
    .choices(["time", "calls", "writes"])
    .default("time");

/** A number of ms >= 0 (`--lease 0`: every prepared transaction is past its lease). */
export const nonNegativeInt = (name: string) => (value: string) => {
  const n = Number(value);
  if (!(/^\d+$/.test(value) && Number.isSafeInteger(n)))
    throw new InvalidArgumentError(`${name} must be an integer >= 0.`);
  return n;
};

/** `--lease`: the coordinators' lease of atomic actions (`recover`, `status`, `doctor`). */
export const leaseOption = () =>
  new Option(
    "--lease <ms>",
    "atomic actions: the coordinators' lease; a prepared transaction younger than this may still be finished by its coordinator",
  )
    .argParser(nonNegativeInt("--lease"))
    .default(10_000);

/** How each move goes, as `move`, `balance` and `drain` take the flags. */
export interface MoveFlags {
  mode: "live" | "offline";
  verify: boolean;
  cleanup: boolean;
  timeout: number;
  copyTimeout?: number;
  lease?: number;
  maxFreeze?: number;
}

/** `MoveFlags` as the options of `move` and `balance` name them (durations in ms; unset flags left out). */
export function moveOptions(o: MoveFlags): {
  mode: "live" | "offline";
  verify: boolean;
  cleanup: boolean;
  timeoutMs: number;
  copyTimeoutMs?: number;
  leaseMs?: number;
  maxFreezeMs?: number;
} {
  return {
    mode: o.mode,
    verify: o.verify,
    cleanup: o.cleanup,
    timeoutMs: o.timeout,
    ...(o.copyTimeout !== undefined ? { copyTimeoutMs: o.copyTimeout } : {}),
    ...(o.lease !== undefined ? { leaseMs: o.lease } : {}),
    ...(o.maxFreeze !== undefined ? { maxFreezeMs: o.maxFreeze } : {}),
  };
}
