import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { describeModuleStructure } from "@shardkit/vitest-config/structure";

describeModuleStructure({
  sourceDir: dirname(fileURLToPath(import.meta.url)),
  packageName: "@shardkit/cli",
  // The dashboard's page: browser modules, shipped as they are.
  pageDir: fileURLToPath(new URL("../dashboard", import.meta.url)),
});
