import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

/** The Prisma packages that must be on one version, as an app installs them. */
const PRISMA_PACKAGES = ["prisma", "@prisma/client", "@prisma/adapter-pg"] as const;

/**
 * The version of each Prisma package installed for the app at `from` (a folder; default the working
 * directory), found as Node would resolve it from there; a package that is not installed is left out
 * (`prisma` is a development dependency, the adapter is optional).
 */
export function prismaVersions(from: string = process.cwd()): Record<string, string> {
  const require = createRequire(join(from, "noop.js"));
  const versions: Record<string, string> = {};
  for (const name of PRISMA_PACKAGES) {
    const version = installedVersion(require, name);
    if (version !== undefined) versions[name] = version;
  }
  return versions;
}

/**
 * A warning when the installed Prisma packages are not all on one version (npm may pick a newer
 * patch for one of them when they are installed without a version), or undefined.
 */
export function prismaVersionWarning(from?: string): string | undefined {
  const versions = prismaVersions(from);
  if (new Set(Object.values(versions)).size <= 1) return undefined;
  const list = Object.entries(versions)
    .map(([name, version]) => `${name} ${version}`)
    .join(", ");
  const newest = Object.values(versions).sort(compareVersions).at(-1)!;
  return `shardkit: the Prisma packages are not on one version (${list}): install them with one version, e.g. npm install ${Object.keys(
    versions,
  )
    .filter((n) => n !== "prisma")
    .map((n) => `${n}@${newest}`)
    .join(" ")}${versions.prisma !== undefined ? ` && npm install -D prisma@${newest}` : ""}`;
}

/** `name`'s version: the package.json of the first `node_modules/<name>` Node's resolution would find. */
function installedVersion(require: NodeJS.Require, name: string): string | undefined {
  for (const dir of require.resolve.paths(name) ?? []) {
    const found = read(join(dir, name, "package.json"));
    if (found?.name === name) return found.version;
  }
  return undefined;
}

function read(file: string): { name?: string; version?: string } | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch {
    return undefined;
  }
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.-]/).map((p) => Number(p) || 0);
  const pb = b.split(/[.-]/).map((p) => Number(p) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
