import { readFile } from "node:fs/promises";
import { PrismaPg } from "@prisma/adapter-pg";
import { createDatabase, dropDatabase, MAIN_PORT, patient } from "@shardkit/test-db";
import { describe, expect, it } from "vitest";
import { withEngine } from "./schema-engine.js";

const schemaPath = new URL("../../test/schema.prisma", import.meta.url).pathname;

describe("schema engine instances", () => {
  it(
    "engines at work at the same time run on instances of their own, and each push succeeds",
    async () => {
      const names = [1, 2, 3].map((i) => `sk_engine_${i}_${process.pid}`);
      const urls = await Promise.all(names.map((name) => createDatabase(MAIN_PORT, name)));
      try {
        const content = await readFile(schemaPath, "utf8");
        const files = [[schemaPath, content] as const];
        // Each run waits, inside its engine, until all three are inside theirs: with one engine at a
        // time this would never end.
        let arrive!: () => void;
        let inside = 0;
        const allInside = new Promise<void>((resolve) => {
          arrive = () => {
            if (++inside === urls.length) resolve();
          };
        });
        const runs = await Promise.all(
          urls.map((url) =>
            withEngine(files, new PrismaPg({ connectionString: url, max: 1 }), async (engine) => {
              arrive();
              await allInside;
              const result = await engine.schemaPush({
                schema: { files: [{ path: schemaPath, content }] },
                force: false,
                filters: { externalTables: [], externalEnums: [] },
              });
              return { engineClass: engine.constructor, steps: result.executedSteps };
            }),
          ),
        );
        expect(runs.every((r) => r.steps > 5)).toBe(true);
        // Each engine's class comes from its own copy of the engine's JS glue module, so each drives
        // its own wasm instance (the glue keeps its instance in a module-level variable).
        expect(new Set(runs.map((r) => r.engineClass)).size).toBe(3);
      } finally {
        for (const name of names) await dropDatabase(MAIN_PORT, name);
      }
    },
    patient(120_000),
  );
});
