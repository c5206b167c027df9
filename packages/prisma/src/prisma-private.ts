// Prisma's private fields, read in one place (`@shardkit/prisma/internal`, internal.ts, is another thing: the
// entry shardkit's own packages share).
import { RegistryConfigError } from "./errors.js";

/**
 * The one place @shardkit/prisma reads Prisma's private fields. Tested on its own
 * (prisma-private.test.ts), so a Prisma upgrade that moves them fails there, not as a misrouted query.
 */

/** What the planner needs to know of a Prisma schema: each model's fields, relations marked. */
export interface DataModel {
  models: Record<string, { fields: Record<string, { kind: string; type: string }> }>;
}

/**
 * Reads the data model a generated Prisma 7 client carries (`_runtimeDataModel`). Its shape is
 * checked, so a Prisma upgrade that changes it fails loudly here rather than routing wrongly.
 */
export function dataModelOf(client: unknown): DataModel {
  const raw = (client as { _runtimeDataModel?: unknown } | null)?._runtimeDataModel as
    | { models?: Record<string, { fields?: unknown }> }
    | undefined;
  if (!raw || typeof raw !== "object" || !raw.models || typeof raw.models !== "object") {
    throw new RegistryConfigError([
      "client: this PrismaClient exposes no runtime data model (_runtimeDataModel); @shardkit/prisma supports Prisma 7 generated clients",
    ]);
  }
  const models: DataModel["models"] = {};
  for (const [name, model] of Object.entries(raw.models)) {
    if (!Array.isArray(model.fields)) {
      throw new RegistryConfigError([`client: model ${name} in the runtime data model has no field list`]);
    }
    const fields: Record<string, { kind: string; type: string }> = {};
    for (const field of model.fields as { name: string; kind: string; type: string }[]) {
      fields[field.name] = { kind: field.kind, type: field.type };
    }
    models[name] = { fields };
  }
  return { models };
}

/** True for Prisma's validation error (the query was refused before reaching the database). */
export function isPrismaValidationError(error: unknown): boolean {
  return (error as { name?: unknown } | null)?.name === "PrismaClientValidationError";
}
