import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { packageSources } from "./sources.js";

async function thrown(trigger) {
  try {
    await trigger();
  } catch (err) {
    return err;
  }
  throw new Error("expected the trigger to throw");
}

/** The error `fn` throws, expected to be an instance of `cls` (fails the test when it throws none). */
export function thrownBy(fn, cls) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(cls);
    return err;
  }
  throw new Error("expected a throw");
}

/**
 * The error rules every shardkit package keeps, as tests: each code is thrown by exactly one class
 * (and that class by a public call, `byCode[code] = [Class, trigger]`), every class extends the
 * package's base and `ShardkitError`, the package's guard narrows by code and knows an error of
 * another copy of the package by its mark, and the source throws no plain `Error` and never
 * constructs the base class.
 *
 * `errors` is the package's errors module (`import * as errors from "./errors.js"`): its
 * `isShardkitError` is the guard, and its base is the exported class every class of `byCode`
 * extends (the nearest one; `ShardkitError` itself in @shardkit/id, whose `from` may construct it).
 * `testUrl` is the test's `import.meta.url`: the sources read are those of its folder.
 * @param {Record<string, unknown> & { isShardkitError: import("./errors.js").Guard }} errors
 * @param {import("./errors.js").ErrorTable<string>} byCode
 * @param {string} testUrl
 */
export function describeErrorRules(errors, byCode, testUrl) {
  const table = Object.entries(byCode);
  const base = baseOf(
    errors,
    table.map(([, [cls]]) => cls),
  );
  const guard = errors.isShardkitError;
  const shardkitError = ancestorNamed(base, "ShardkitError");
  const prefix = base === shardkitError ? "" : base.name.replace(/Error$/, "");
  const forbidden = new RegExp(`\\bnew (?:${prefix ? `${prefix}|` : ""}Type|Range|Syntax)?Error\\(`);
  const sourceDir = dirname(fileURLToPath(testUrl));
  describe("one class per code", () => {
    it.each(table)("%s is thrown by its own class, and only by it", async (code, [cls, trigger]) => {
      const err = await thrown(trigger);
      expect(err).toBeInstanceOf(cls);
      expect(err).toBeInstanceOf(base);
      expect(err).toBeInstanceOf(shardkitError);
      expect(err.code).toBe(code);
      expect(err.name).toBe(cls.name);
      expect(guard(err, code)).toBe(true);
      for (const [other, [otherCls]] of table) {
        if (other === code) continue;
        expect(err).not.toBeInstanceOf(otherCls);
        expect(guard(err, other)).toBe(false);
      }
    });

    it("the guard recognises an error by its mark and code, never by its class (duplicate installs)", () => {
      const [code, other] = table.map(([c]) => c);
      const foreign = Object.assign(new Error("from another copy"), {
        code,
        [Symbol.for("shardkit.error")]: true,
      });
      expect(foreign).not.toBeInstanceOf(base);
      expect(guard(foreign, code)).toBe(true);
      expect(guard(foreign)).toBe(true);
      if (other !== undefined) expect(guard(foreign, other)).toBe(false);
      expect(guard(Object.assign(new Error("look-alike"), { code }), code)).toBe(false);
      expect(guard(new Error("plain"), code)).toBe(false);
      expect(guard(null, code)).toBe(false);
    });

    it("no two codes share a class", () => {
      const classes = table.map(([, [cls]]) => cls);
      expect(new Set(classes).size).toBe(classes.length);
    });

    it(`the source throws no plain Error and never constructs the base class (${forbidden})`, () => {
      const files = packageSources(sourceDir);
      expect(files).toContain(join(sourceDir, "errors.ts"));
      for (const file of files) expect(readFileSync(file, "utf8"), file).not.toMatch(forbidden);
    });
  });
}

/** The exported class of `errors` that every one of `classes` extends, the nearest of them. */
function baseOf(errors, classes) {
  const bases = Object.values(errors).filter(
    (value) =>
      typeof value === "function" &&
      typeof value.prototype === "object" &&
      !classes.includes(value) &&
      classes.every((cls) => cls.prototype instanceof value),
  );
  const base = bases.find((cls) => bases.every((other) => other === cls || cls.prototype instanceof other));
  if (!base)
    throw new Error(`no exported class of the errors module is the base of ${classes.map((c) => c.name)}`);
  return base;
}

/** The class named `name` that `cls` extends (`ShardkitError` of @shardkit/id, for a package's base). */
function ancestorNamed(cls, name) {
  for (let c = cls; c && c !== Function.prototype; c = Object.getPrototypeOf(c))
    if (c.name === name) return c;
  throw new Error(`${cls.name} does not extend ${name}`);
}
