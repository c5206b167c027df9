// The runtime the reference services share (tooling/service-kit, the private @shardkit/service-kit:
// credentials, the token script, start-up, HTTP access, customer placement) is written once, there.
// A template gets the entries its app imports as files of its own, unchanged: `@shardkit/service-kit/<entry>`
// -> src/service-kit/<entry>.ts (with the kit's files that entry imports), and the app's imports of
// it become relative ones. A project made from a template owns that code (its login, its roles) and
// depends on no package of the kit's.
import { readFileSync } from "node:fs";
import { join, posix } from "node:path";

/** The workspace package whose entries the templates copy, and where a template's copy goes. */
export const SERVICE_KIT = { name: "@shardkit/service-kit", dir: "src/service-kit" };

const IMPORT = /(\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)(["'])@shardkit\/service-kit\/([\w-]+)\2/g;

/** The kit's entries `text` imports (`@shardkit/service-kit/<entry>`). */
export function serviceKitEntries(text: string): string[] {
  return [...text.matchAll(IMPORT)].map((m) => m[3]!);
}

/** `text` (the file at `path` of the template) with its imports of the kit's entries made relative. */
export function localServiceKit(path: string, text: string): string {
  return text.replace(IMPORT, (_all, before: string, quote: string, entry: string) => {
    let rel = posix.relative(posix.dirname(path), `${SERVICE_KIT.dir}/${entry}.js`);
    if (!rel.startsWith(".")) rel = `./${rel}`;
    return `${before}${quote}${rel}${quote}`;
  });
}

/** A kit that cannot give what an app imports (the message says what). */
export type KitProblem = (message: string) => Error;

/**
 * The template's src/service-kit/ files for the `entries` the app imports: each entry's file of
 * tooling/service-kit as it is (package.json's `exports`), and the kit's files it imports in turn
 * (`./<name>.js`), so what the template runs is what the repository's apps run.
 */
export function serviceKitFiles(
  kitDir: string,
  app: string,
  entries: Iterable<string>,
  problem: KitProblem,
): Map<string, string> {
  const exports: Record<string, string> =
    JSON.parse(readFileSync(join(kitDir, "package.json"), "utf8")).exports ?? {};
  const files = new Map<string, string>();
  const add = (source: string, via: string) => {
    const name = posix.basename(source).replace(/\.ts$/, "");
    const target = `${SERVICE_KIT.dir}/${name}.ts`;
    if (files.has(target)) return;
    if (posix.dirname(source) !== "./src" || !source.endsWith(".ts"))
      throw problem(`${SERVICE_KIT.name}: ${via} is ${source}; the templates copy files of its src/ only`);
    const text = readFileSync(join(kitDir, source), "utf8");
    files.set(target, text);
    for (const m of text.matchAll(/\bfrom\s+["']\.\/([\w-]+)\.js["']/g))
      add(`./src/${m[1]}.ts`, `${name}.ts's import`);
  };
  for (const entry of entries) {
    const source = exports[`./${entry}`];
    if (typeof source !== "string")
      throw problem(
        `apps/${app} imports ${SERVICE_KIT.name}/${entry}, which tooling/service-kit does not export`,
      );
    add(source, `the entry ./${entry}`);
  }
  return files;
}
