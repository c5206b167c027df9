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
 * package's base and `ShardkitError`, the package's guard narrows by code, and the source throws
 * no plain `Error` and never constructs the base class.
 * @param {import("./errors.js").ErrorRules} rules
 */
export function describeErrorRules({ byCode, base, shardkitError, guard, anyGuard, sourceDir, forbidden }) {
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
      expect(anyGuard(err, code)).toBe(true);
      for (const [other, [otherCls]] of table) {
        if (other === code) continue;
        expect(err).not.toBeInstanceOf(otherCls);
        expect(guard(err, other)).toBe(false);
      }
    });

    it("no two codes share a class", () => {
      const classes = table.map(([, [cls]]) => cls);
      expect(new Set(classes).size).toBe(classes.length);
    });

    it("the source throws no plain Error and never constructs the base class", () => {
      const files = packageSources(sourceDir);
      expect(files.length).toBeGreaterThan(0);
      for (const file of files) expect(readFileSync(file, "utf8"), file).not.toMatch(forbidden);
    });
  });
}
