import { readFileSync } from "node:fs";
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

/**
 * The error rules every shardkit package keeps, as tests: each code is thrown by exactly one class
 * (and that class by a public call, `byCode[code] = [Class, trigger]`), every class extends the
 * package's base and `ShardkitError`, the package's guard narrows by code and knows an error of
 * another copy of the package by its mark, and the source throws no plain `Error` and never
 * constructs the base class.
 * @param {import("./errors.js").ErrorRules} rules
 */
export function describeErrorRules({ byCode, base, guard, sourceDir }) {
  const shardkitError = ancestorNamed(base, "ShardkitError");
  const prefix = base.name.replace(/Error$/, "");
  const forbidden = new RegExp(`\\bnew (?:${prefix}|Type|Range|Syntax)?Error\\(`);
  const table = Object.entries(byCode);
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
      expect(files.length).toBeGreaterThan(0);
      for (const file of files) expect(readFileSync(file, "utf8"), file).not.toMatch(forbidden);
    });
  });
}

/** The class named `name` that `cls` extends (`ShardkitError` of @shardkit/id, for a package's base). */
function ancestorNamed(cls, name) {
  for (let c = cls; c && c !== Function.prototype; c = Object.getPrototypeOf(c))
    if (c.name === name) return c;
  throw new Error(`${cls.name} does not extend ${name}`);
}
