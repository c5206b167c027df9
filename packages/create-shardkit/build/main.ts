// `pnpm --filter create-shardkit build` (and prepack): writes templates/<name>/ from apps/<name>.
import { TemplateBuildError, writeTemplates } from "./templates.js";

try {
  for (const { name, files, dir } of await writeTemplates())
    console.log(`template ${name}: ${files} files in ${dir}`);
} catch (err) {
  console.error(err instanceof TemplateBuildError ? `create-shardkit: ${err.message}` : err);
  process.exitCode = 1;
}
