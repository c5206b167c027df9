/**
 * Polls `check` every `everyMs` (default 50) until it returns true. Rejects naming `what` once
 * `timeoutMs` (default 60 000 times the machine's load per core, `patient`: only a hang trips it) have passed; a throw counts as "not yet".
 */
export declare function eventually(
  what: string,
  check: () => boolean | Promise<boolean>,
  options?: { timeoutMs?: number; everyMs?: number },
): Promise<void>;
