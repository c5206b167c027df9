// `pnpm --filter create-shardkit build`: writes templates/<name>/ from apps/<name>.
// `--check` (the package's prepack): writes nothing, and fails naming what is stale. A pack never
// rewrites templates/ in place: a test run packs this package in one lane while another lane's tests
// read templates/ (the CLI's tests scaffold from it), and a file half-synced under a reader is a red
// test that proves nothing. The build, run before any pack, is what writes them.
import { staleTemplates, TemplateBuildError, writeTemplates } from "./templates.js";

try {
  if (process.argv.includes("--check")) {
    const stale = await staleTemplates();
    if (stale.length > 0) {
      console.error(
        `create-shardkit: templates/ is not what the build makes from apps/ now (run \`pnpm --filter create-shardkit build\` first):\n  ${stale.join("\n  ")}`,
      );
      process.exitCode = 1;
    }
  } else {
    for (const { name, files, dir } of await writeTemplates())
      console.log(`template ${name}: ${files} files in ${dir}`);
  }
} catch (err) {
  console.error(err instanceof TemplateBuildError ? `create-shardkit: ${err.message}` : err);
  process.exitCode = 1;
}
