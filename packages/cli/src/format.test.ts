import { describe, expect, it } from "vitest";
import { compareSchemas } from "./drift.js";
import { alignRight, duration, plainDbError, redactUrl, table } from "./format.js";
import { parseTables } from "./move.js";

describe("table", () => {
  it("aligns columns two spaces apart, numbers to the right, no trailing spaces, - for nothing", () => {
    expect(
      table(
        ["NAME", alignRight("N"), "NOTE"],
        [
          ["a", 1, null],
          ["long name", 1234, "x"],
        ],
      ),
    ).toBe(["NAME          N  NOTE", "a             1  -", "long name  1234  x"].join("\n"));
  });
});

describe("formats", () => {
  it("durations, Prisma's raw-query wrapper, passwords", () => {
    expect([duration(850), duration(1234), duration(185_000), duration(null)]).toEqual([
      "850 ms",
      "1.2 s",
      "3 min 05 s",
      "-",
    ]);
    expect(plainDbError("Raw query failed. Code: `N/A`. Message: `Can't reach database server at h:1`")).toBe(
      "Can't reach database server at h:1",
    );
    expect(redactUrl("postgresql://app:secret@db:5432/x")).toBe("postgresql://app:***@db:5432/x");
    expect(redactUrl("postgresql://app:se/c@ret@db/x?sslmode=require")).toBe(
      "postgresql://app:***@db/x?sslmode=require",
    );
    expect(redactUrl("postgresql://app@db/x")).toBe("postgresql://app@db/x");
  });
});

describe("move arguments", () => {
  it("tables: Table, Table:column, Table:column:bits, comma lists", () => {
    expect(parseTables(["Wallet", "Order:orderId,IdempotencyKey:shard:bits"])).toEqual([
      { table: "Wallet", column: "id" },
      { table: "Order", column: "orderId" },
      { table: "IdempotencyKey", column: "shard", kind: "bits" },
    ]);
    expect(() => parseTables(["Wallet", "Wallet:id"])).toThrow("--table Wallet: listed twice");
    expect(() => parseTables([])).toThrow(/--table: list every table/);
  });
});

describe("compareSchemas", () => {
  const t = (name: string) => ({ kind: "table" as const, name, detail: "" });
  const c = (name: string, detail: string) => ({ kind: "column" as const, name, detail });
  it("takes the schema most databases share as the reference; a missing table stands for its columns", () => {
    const common = [t("A"), c("A.id", "uuid not null"), t("B"), c("B.id", "uuid not null")];
    const report = compareSchemas([
      { database: "x", objects: common },
      { database: "y", objects: [t("A"), c("A.id", "text not null"), c("A.extra", "int")] },
      { database: "z", objects: common },
    ]);
    expect(report).toEqual({
      reference: ["x", "z"],
      differences: [
        {
          database: "y",
          missing: ["table B"],
          extra: ["column A.extra"],
          changed: ["column A.id: text not null <> uuid not null"],
        },
      ],
    });
    expect(compareSchemas([{ database: "x", objects: common }]).differences).toEqual([]);
  });
});
