// A setup file of every project (`packageProject`): the project's default time limits, those of the
// tests and hooks that pass none of their own, scaled by the machine's load when each test file
// starts, as `patient()` scales the limits tests pass (docs/development.md, "Tests on a busy
// machine"). vitest restores its config after each file, so every file scales the same base.
import { patient } from "@shardkit/test-db";
import { inject, vi } from "vitest";

const { testTimeout, hookTimeout } = inject("shardkitTimeouts");
vi.setConfig({ testTimeout: patient(testTimeout), hookTimeout: patient(hookTimeout) });
