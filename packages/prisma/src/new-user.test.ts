import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PrismaPg } from "@prisma/adapter-pg";
import { ShardedUUID } from "@shardkit/id";
import { createDatabase, dropDatabase, ensureCluster, MAIN_PORT, patient } from "@shardkit/test-db";
import { catalogVersion, npmInstall, packWorkspacePackages } from "@shardkit/vitest-config/quality";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rolloutSchema } from "./rollout.js";

// A new user's app, outside the workspace: a plain npm project with its own schema and rows from
// before sharding (v4 ids), which installs the packed packages one `npm install` at a time and
// adopts shardkit as the README and docs/migrating.md (both in this package) say. The app is test/new-user/.

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const fixture = join(pkgDir, "test/new-user");
const workspacePackages = ["id", "scatter", "prisma"].map((name) => join(pkgDir, "..", name));
/** `prisma generate` offline (a stub for the native schema engine), with the app's own prisma CLI. */
const prismaGenerate = join(pkgDir, "node_modules/.bin/shardkit-prisma-generate");

let work = "";
let app = "";
const names = ["0_0", "0_1", "1_0"].map((shard) => `sk_new_user_${process.pid}_${shard}`);
let urls: string[] = [];

/** The app's environment: no npm or pnpm variables of the test run, the app's own binaries first. */
function appEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^(npm|pnpm)_/i.test(key)));
  return {
    ...env,
    PATH: `${join(app, "node_modules/.bin")}:${process.env.PATH}`,
    FORCE_COLOR: "0",
    ...extra,
  };
}

function inApp(cmd: string, args: string[], extra: Record<string, string> = {}): string {
  return execFileSync(cmd, args, {
    cwd: app,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: appEnv(extra),
    timeout: patient(90_000),
    killSignal: "SIGKILL",
  });
}

/** What `npm run <script>` printed last on stdout: its one JSON line. */
function runJson(script: string, extra: Record<string, string>) {
  const lines = inApp("npm", ["run", "--silent", script], extra).trim().split("\n");
  return JSON.parse(lines[lines.length - 1]!);
}

/** `npm install <name>@<the catalog's version>`, exact when the catalog pins an exact version. */
function installPinned(name: string, dev = false) {
  const version = catalogVersion(name);
  const exact = /^\d/.test(version);
  npmInstall([...(dev ? ["-D"] : []), ...(exact ? ["--save-exact"] : []), `${name}@${version}`], app);
}

const databaseEnv = () => ({
  DATABASE_URL: urls[0]!,
  DATABASE_URL_0_1: urls[1]!,
  DATABASE_URL_1_0: urls[2]!,
});

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "shardkit-new-user-"));
  app = join(work, "app");
  await ensureCluster("main", MAIN_PORT);
  urls = [];
  for (const name of names) urls.push(await createDatabase(MAIN_PORT, name));

  // Day 0: an app with plain Prisma and its own schema.
  mkdirSync(join(app, "prisma"), { recursive: true });
  for (const file of ["package.json", "tsconfig.json", "day0.ts", "adopt.ts"]) {
    copyFileSync(join(fixture, file), join(app, file));
  }
  copyFileSync(join(fixture, "schema.prisma"), join(app, "prisma/schema.prisma"));
  for (const name of ["@prisma/client", "@prisma/adapter-pg", "pg"]) installPinned(name);
  for (const name of ["prisma", "tsx", "typescript", "@types/node"]) installPinned(name, true);
  inApp(prismaGenerate, ["prisma"]);
  // Stands in for `prisma db push` (no native schema engine on these machines).
  await rolloutSchema({
    schema: join(app, "prisma"),
    targets: [{ name: names[0]!, adapter: new PrismaPg({ connectionString: urls[0]! }) }],
    onProgress: () => {},
  });
}, patient(180_000));

afterAll(async () => {
  for (const name of names) await dropDatabase(MAIN_PORT, name);
  if (process.env.SHARDKIT_KEEP_PACK) console.log(`new-user app kept in ${app}`);
  else if (work) rmSync(work, { recursive: true, force: true });
}, patient(60_000));

describe("a new user adopts shardkit from the packed packages", () => {
  let day0: { users: { id: string; email: string; posts: string[] }[] };

  it(
    "day 0: plain Prisma on one database writes rows with v4 ids",
    () => {
      day0 = runJson("day0", databaseEnv());
      const ids = day0.users.flatMap((u) => [u.id, ...u.posts]);
      expect(ids).toHaveLength(5);
      for (const id of ids) {
        expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        expect(ShardedUUID.isValid(id)).toBe(false);
      }
    },
    patient(60_000),
  );

  it(
    "adoption: one npm install per tarball, shardkit.prisma copied in, three databases",
    () => {
      const tarballs = packWorkspacePackages(workspacePackages, work);
      for (const tarball of tarballs) npmInstall([tarball], app);
      copyFileSync(
        join(app, "node_modules/@shardkit/prisma/schema/shardkit.prisma"),
        join(app, "prisma/shardkit.prisma"),
      );
      inApp(prismaGenerate, ["prisma"]);

      const result = runJson("adopt", databaseEnv());
      const [bo, cy] = day0.users;
      // The emails of the existing rows are claimed.
      expect(result.backfill).toEqual({ rows: 2, claimed: 2, conflicts: 0 });
      // Existing rows are read by their v4 ids, their children by the parent's id.
      expect(result.legacy).toEqual({
        ids: [bo!.id, cy!.id],
        byId: { id: bo!.id, email: "bo@x.com", role: "MEMBER" },
        postsByAuthor: [...bo!.posts].sort(),
      });
      // A new user is placed by region (eu: 1/0, in the third database), its post colocated.
      expect(result.created).toMatchObject({
        shard: "1/0",
        postShards: ["1/0"],
        userIn: [0, 0, 1],
        postIn: [0, 0, 1],
      });
      expect(ShardedUUID.shardOf(result.created.id).key).toBe("1/0");
      expect(result.placedUs).toEqual({ shard: "0/1", userIn: [0, 1, 0] });
      // One email across every shard, whatever its case, old rows' included.
      expect(result.duplicate).toBe("UNIQUE_VIOLATION");
      expect(result.duplicateOfOld).toBe("UNIQUE_VIOLATION");
      expect(result.claims).toEqual(["ana@x.com held", "bo@x.com held", "cy@x.com held", "dee@x.com held"]);
      // Login by email, any case: the new user on 1/0, an old one (stored as "Cy@X.com") on 0/0.
      expect(result.login).toEqual({ new: true, old: true, oldEmail: "Cy@X.com" });
      // New children of old users stay on 0/0 (the first database), with sharded ids.
      expect(result.legacyChildren).toEqual({
        post: "0/0",
        postIn: [1, 0, 0],
        nested: "0/0",
        nestedIn: [1, 0, 0],
      });
      // Without a legacy shard, a v4 id is refused, never guessed.
      expect(result.withoutLegacy).toBe("INVALID_SHARDED_ID");
    },
    patient(120_000),
  );

  it(
    "the app type-checks with tsc (strict, moduleResolution node16)",
    () => {
      expect(inApp("npm", ["run", "--silent", "typecheck"])).toBe("");
    },
    patient(60_000),
  );
});
