import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { describeModuleStructure } from "@shardkit/vitest-config/structure";

describeModuleStructure({
  sourceDir: dirname(fileURLToPath(import.meta.url)),
  packageName: "@shardkit/id",
  entriesOnMain: ["zod.ts"],
});
