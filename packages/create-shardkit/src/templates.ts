import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** A template this copy of create-shardkit ships. */
export interface TemplateInfo {
  name: string;
  /** What the service does (its package.json's description). */
  description: string;
  /** The folder its files are copied from. */
  dir: string;
}

/** The package's `templates/` folder (made from the reference services when the package is built). */
export function defaultTemplatesDir(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), "../templates");
}

/** The templates in `templatesDir`, by name. */
export function listTemplates(templatesDir: string = defaultTemplatesDir()): TemplateInfo[] {
  if (!existsSync(templatesDir)) return [];
  return readdirSync(templatesDir)
    .filter((name) => existsSync(join(templatesDir, name, "package.json")))
    .sort()
    .map((name) => {
      const dir = join(templatesDir, name);
      const { description = "" } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        description?: string;
      };
      return { name, description, dir };
    });
}
