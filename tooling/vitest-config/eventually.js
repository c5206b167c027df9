import { patient } from "@shardkit/test-db";

/**
 * Polls `check` every `everyMs` until it returns true. Rejects naming `what` (and `check`'s last
 * error, if it threw) once `timeoutMs` have passed without it: the default, 60 s scaled by the
 * machine's load (`patient`), is generous on purpose, so that only a hang trips it, never a busy
 * machine. An error `check` throws counts as "not yet". The one poll helper of the repository's tests (a sleep is never synchronisation).
 * @param {string} what
 * @param {() => boolean | Promise<boolean>} check
 * @param {{ timeoutMs?: number, everyMs?: number }} [options]
 * @returns {Promise<void>}
 */
export async function eventually(what, check, { timeoutMs = patient(60_000), everyMs = 50 } = {}) {
  const deadline = performance.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      if (await check()) return;
      last = undefined;
    } catch (error) {
      last = error;
    }
    if (performance.now() > deadline) {
      throw new Error(
        `still not the case after ${timeoutMs} ms: ${what}`,
        last ? { cause: last } : undefined,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
