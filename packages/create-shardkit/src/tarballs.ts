import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { gunzipSync } from "node:zlib";
import { PackagesDirError } from "./errors.js";

/** A package from a local tarball (`npm pack` / `pnpm pack` output). */
export interface LocalPackage {
  name: string;
  version: string;
  /** The tarball's absolute path. */
  file: string;
}

/** The name and version in a gzipped npm tarball's `<top folder>/package.json`, or why there are none. */
function tarballManifest(file: string): { name: string; version: string } | string {
  let tar: Buffer;
  try {
    tar = gunzipSync(readFileSync(file));
  } catch (err) {
    return `not gzip (${(err as Error).message})`;
  }
  const text = (from: number, length: number) => {
    const bytes = tar.subarray(from, from + length);
    const end = bytes.indexOf(0);
    return bytes.subarray(0, end < 0 ? length : end).toString("utf8");
  };
  let longName: string | undefined;
  for (let at = 0; at + 512 <= tar.length; ) {
    const name = text(at, 100);
    if (name === "") break;
    const size = Number.parseInt(text(at + 124, 12).trim() || "0", 8);
    const type = text(at + 156, 1);
    // POSIX ustar keeps a path prefix at 345 (GNU tar's "ustar  " headers use those bytes otherwise).
    const prefix = text(at + 257, 6) === "ustar" ? text(at + 345, 155) : "";
    const path = longName ?? (prefix ? `${prefix}/${name}` : name);
    longName = undefined;
    const body = tar.subarray(at + 512, at + 512 + size);
    if (type === "x") {
      // A pax header: its `path` record names the next entry.
      const m = /\d+ path=([^\n]*)\n/.exec(body.toString("utf8"));
      if (m) longName = m[1];
    } else if (type === "L") {
      // A GNU long name: the next entry's path.
      longName = body.toString("utf8").replace(/\0+$/, "");
    } else if ((type === "0" || type === "") && /^[^/]+\/package\.json$/.test(path)) {
      let manifest: { name?: unknown; version?: unknown };
      try {
        manifest = JSON.parse(body.toString("utf8"));
      } catch {
        return `${path} is not JSON`;
      }
      if (typeof manifest.name !== "string" || typeof manifest.version !== "string")
        return `${path} has no name or version`;
      return { name: manifest.name, version: manifest.version };
    }
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return "no package.json in it";
}

/** The `@shardkit` packages of the `.tgz` files in `dir` (one level, not recursive); other packages' tarballs are left alone. */
export function readPackagesDir(dir: string): LocalPackage[] {
  const abs = resolve(dir);
  let entries: string[];
  try {
    if (!statSync(abs).isDirectory()) throw new PackagesDirError(dir, "not a folder");
    entries = readdirSync(abs);
  } catch (err) {
    if (err instanceof PackagesDirError) throw err;
    throw new PackagesDirError(dir, "no such folder", { cause: err });
  }
  const tarballs = entries.filter((f) => f.endsWith(".tgz")).sort();
  if (tarballs.length === 0)
    throw new PackagesDirError(dir, "no .tgz files in it (npm pack or pnpm pack writes them)");
  const found = new Map<string, LocalPackage>();
  for (const tarball of tarballs) {
    const file = join(abs, tarball);
    const manifest = tarballManifest(file);
    if (typeof manifest === "string")
      throw new PackagesDirError(dir, `${tarball} is not an npm package tarball: ${manifest}`);
    if (!manifest.name.startsWith("@shardkit/")) continue;
    const other = found.get(manifest.name);
    if (other)
      throw new PackagesDirError(
        dir,
        `two tarballs of ${manifest.name}: ${other.file.slice(abs.length + 1)} and ${tarball}`,
      );
    found.set(manifest.name, { ...manifest, file });
  }
  if (found.size === 0) throw new PackagesDirError(dir, "no @shardkit package among its .tgz files");
  return [...found.values()];
}
