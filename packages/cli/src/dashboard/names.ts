// How the dashboard names a database: `host:port/database`, from its URL. Never a user, a password
// or a query string (which may carry one): the page, its answers and its errors only use these.
import type { Database } from "@shardkit/prisma";
import type { OpenedConfig, RawClient } from "../config.js";

/** `host:port/database` of a PostgreSQL URL; `database #i` when it does not parse. */
export function displayName(url: string, index: number): string {
  try {
    const u = new URL(url);
    const port = u.port || "5432";
    const database = decodeURIComponent(u.pathname.replace(/^\//, ""));
    return `${u.hostname}:${port}/${database}`;
  } catch {
    return `database #${index + 1}`;
  }
}

/** Each database's display name, and the way back; names made unique by their index when two collide. */
export interface Names {
  of(physical: Database<RawClient>): string;
  /** The database a display name or registry name denotes. */
  find(name: string): Database<RawClient> | undefined;
  /** Replaces every registry name (a redacted URL) and URL in `text` by its display name. */
  clean(text: string): string;
  /** A registry name as the page shows it: its database's display name, else the name cleaned. */
  show(registryName: string): string;
}

export function namesOf(opened: OpenedConfig): Names {
  const byPhysical = new Map<Database<RawClient>, string>();
  const taken = new Set<string>();
  opened.registry.databases.forEach((physical, i) => {
    let name = displayName(opened.urlOf(physical), i);
    if (taken.has(name)) name = `${name} #${i + 1}`;
    taken.add(name);
    byPhysical.set(physical, name);
  });
  // Longest first: a URL that is a prefix of another never replaces part of it.
  const replacements = [...byPhysical]
    .flatMap(([physical, name]) => [
      [opened.urlOf(physical), name],
      [physical.name, name],
    ])
    .sort((a, b) => b[0]!.length - a[0]!.length) as [string, string][];
  return {
    of: (physical) => byPhysical.get(physical)!,
    find: (name) => [...byPhysical].find(([p, n]) => n === name || p.name === name)?.[0],
    show(registryName) {
      const physical = this.find(registryName);
      return physical ? this.of(physical) : this.clean(registryName);
    },
    clean(text) {
      let out = text;
      for (const [from, to] of replacements) out = out.split(from).join(to);
      // Any other URL with credentials (a replica's, one a driver quotes): its user and password go;
      // and a role PostgreSQL names in an error (`role "x" does not exist`, `for user "x"`).
      return out
        .replace(/\b(postgres(?:ql)?:\/\/)[^\s/@]*@/gi, "$1")
        .replace(/\b(role|user) "(?:[^"]|"")*"/gi, '$1 "***"');
    },
  };
}
