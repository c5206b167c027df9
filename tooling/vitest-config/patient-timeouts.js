// A setup file of every project (`packageProject`): the project's default time limits, those of the
// tests and hooks that pass none of their own, scaled by the machine's load when each test file
// starts, as `patient()` scales the limits tests pass (docs/development.md, "Tests on a busy
// machine"). vitest restores its config after each file, so every file scales the same base.
import { appendFileSync, readFileSync } from "node:fs";
import { patient } from "@shardkit/test-db";
import { afterAll, expect, inject, vi } from "vitest";

const { testTimeout, hookTimeout } = inject("shardkitTimeouts");
vi.setConfig({ testTimeout: patient(testTimeout), hookTimeout: patient(hookTimeout) });

// With SHARDKIT_TEST_CPU_LOG=<file>, each test file appends one line to <file> when it ends: its
// path and the CPU seconds its process used (user and system, its own and its ended children's:
// programs it ran, not the database servers it talked to). A lane runs each file in a process of
// its own, so the lines add up to what each file costs (docs/development.md, "What a run costs").
const cpuLog = process.env.SHARDKIT_TEST_CPU_LOG;
if (cpuLog) {
  afterAll(() => {
    // /proc/self/stat past the command in parentheses: utime, stime, cutime and cstime (proc(5)'s
    // fields 14-17, in ticks of 1/100 s) are at 11-14.
    const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ");
    const [own, children] = [11, 13].map((i) => (Number(fields[i]) + Number(fields[i + 1])) / 100);
    appendFileSync(cpuLog, `${JSON.stringify({ file: expect.getState().testPath, own, children })}\n`);
  });
}
