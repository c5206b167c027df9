import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { PrismaPg } from "@prisma/adapter-pg";
import {
  type Database,
  type ShardRegistry,
  shardRegistryFromConfig,
  shardRegistryFromEnv,
} from "@shardkit/prisma";
import { JIT_OFF_OPTION, markJitOff, orAfter } from "@shardkit/prisma/internal";
import { ConfigUnavailableError, UnknownDatabaseError } from "./errors.js";
import { redactUrl } from "./format.js";
import { PrismaClient } from "./generated/prisma/client.js";

/** Where a command reads the shard configuration: the apps' own JSON, from a file or `SHARDKIT_SHARDS`. */
export interface ConfigOptions {
  /** A JSON file in the `SHARDKIT_SHARDS` format; wins over the environment variable. */
  config?: string;
  /** The environment to read `SHARDKIT_SHARDS` from. Default `process.env`. */
  env?: Record<string, string | undefined>;
  /** Relative `config` paths resolve from here. Default `process.cwd()`. */
  cwd?: string;
  /**
   * How long opening a connection to a database may take (a busy host accepts late). Default 5000
   * ms; `status` uses its `--timeout`.
   */
  connectTimeoutMs?: number;
}

/** The client the CLI opens per database: a Prisma client with no models, for raw SQL only. */
export type RawClient = InstanceType<typeof PrismaClient>;

/** The configuration, opened: a registry of raw clients, and each database's URL (adapters need it). */
export interface OpenedConfig {
  registry: ShardRegistry<RawClient>;
  /** Where the configuration came from: a file path or `SHARDKIT_SHARDS`. */
  source: string;
  urlOf(physical: Database<RawClient>): string;
  /** Disconnects every client. */
  close(): Promise<void>;
}

const VARIABLE = "SHARDKIT_SHARDS";

/** The pool the CLI itself opens per database (the config's `pool` is the apps' and is what `doctor` checks). */
const CLI_POOL = 4;
/** How long opening a connection may take, unless the command says (`connectTimeoutMs`). */
const DEFAULT_CONNECT_TIMEOUT_MS = 5000;
/** How long a finished command waits for its database pools to close before it moves on. */
const CLOSE_TIMEOUT_MS = 5000;

/**
 * Reads the configuration and builds a registry with one raw Prisma client (driver adapter
 * `@prisma/adapter-pg`) per database and replica. Nothing connects until a command asks.
 * Throws `ConfigUnavailableError` when there is no configuration to read, and
 * `RegistryConfigError` (from `@shardkit/prisma`) when it is there but wrong.
 */
export function openConfig(options: ConfigOptions = {}): OpenedConfig {
  const env = options.env ?? process.env;
  const urls = new Map<RawClient, string>();
  const createClient = (url: string, _shards: unknown, database: { pool: number }) => {
    const client = new PrismaClient({
      adapter: new PrismaPg({
        connectionString: url,
        max: Math.min(database.pool, CLI_POOL),
        connectionTimeoutMillis: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
        // JIT off from each connection's start: the load's reads (the dashboard's every refresh,
        // the balancer's plans) go in one round trip, not in a transaction that turns it off.
        options: JIT_OFF_OPTION,
      }),
    });
    urls.set(client, url);
    return markJitOff(client);
  };
  let registry: ShardRegistry<RawClient>;
  let source: string;
  if (options.config !== undefined) {
    source = resolve(options.cwd ?? process.cwd(), options.config);
    let text: string;
    try {
      text = readFileSync(source, "utf8");
    } catch (error) {
      throw new ConfigUnavailableError(
        `cannot read the configuration file ${source}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw new ConfigUnavailableError(
        `the configuration file ${source} is not JSON: ${(error as Error).message}`,
        { cause: error },
      );
    }
    registry = shardRegistryFromConfig(json, { createClient });
  } else if (env[VARIABLE] !== undefined) {
    source = VARIABLE;
    registry = shardRegistryFromEnv({ createClient, env });
  } else {
    throw new ConfigUnavailableError(
      `no shard configuration: pass --config <file> or set ${VARIABLE} (JSON: [{ "group", "member", "url" }, ...] or { "shards": [...], "databases": [...] })`,
    );
  }
  return {
    registry,
    source,
    urlOf(physical) {
      return urls.get(physical.client)!;
    },
    // A client whose database never answered, or a probe abandoned at its timeout, may make a
    // disconnect fail, or wait for ever on a connection a frozen server keeps busy: the command is
    // over by then, and its report must not be lost to that (cli.ts ends the process after it).
    close: () => orAfter(CLOSE_TIMEOUT_MS, undefined, () => registry.disconnect().catch(() => {})),
  };
}

/**
 * The database the user named: its URL as written in the configuration, its name as shardkit
 * prints it (the URL without a password), or its database name alone when only one database of
 * the configuration has it. Throws `UnknownDatabaseError` otherwise.
 */
export function findDatabase(opened: OpenedConfig, name: string): Database<RawClient> {
  const physical = opened.registry.databases;
  const exact = physical.filter((p) => opened.urlOf(p) === name || p.name === name);
  if (exact.length === 1) return exact[0]!;
  const byDatabase = physical.filter((p) => databaseName(opened.urlOf(p)) === name);
  if (byDatabase.length === 1) return byDatabase[0]!;
  const known = physical.map((p) => p.name);
  if (byDatabase.length > 1) {
    throw new UnknownDatabaseError(
      `${JSON.stringify(redactUrl(name))} names ${byDatabase.length} databases`,
      known,
    );
  }
  throw new UnknownDatabaseError(
    `no database ${JSON.stringify(redactUrl(name))} in the configuration`,
    known,
  );
}

/** The database name of a PostgreSQL URL (its path), or "" when it has none. */
export function databaseName(url: string): string {
  try {
    return decodeURIComponent(new URL(url).pathname.replace(/^\//, ""));
  } catch {
    return "";
  }
}
