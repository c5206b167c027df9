import { defineConfig } from "vitest/config";

const jsonReport = process.env.SHARDKIT_TEST_REPORT; // set by .ci/run to count passed and failed tests

// One run over every workspace project; each package's vitest.config.ts comes from @shardkit/vitest-config.
export default defineConfig({
  test: {
    projects: ["packages/*/vitest.config.ts", "apps/*/vitest.config.ts"],
    ...(jsonReport ? { reporters: ["default", "json"], outputFile: { json: jsonReport } } : {}),
  },
});
