import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** A package's sources under `dir`: every .ts file but tests and benchmarks, folders included. */
export function packageSources(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return packageSources(path);
    return name.endsWith(".ts") && !/\.test(-d)?\.ts$|\.bench\.ts$/.test(name) ? [path] : [];
  });
}

/** A page's browser modules under `dir`: every .js file, folders included. */
export function pageSources(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return pageSources(path);
    return name.endsWith(".js") ? [path] : [];
  });
}
