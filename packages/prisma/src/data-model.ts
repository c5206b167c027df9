import { RegistryConfigError } from "./errors.js";

/** What the router needs to know of a Prisma schema: each model's fields, relations marked. */
export interface DataModel {
  models: Record<string, { fields: Record<string, { kind: string; type: string }> }>;
}

/**
 * Reads the data model a generated Prisma 7 client carries. This is the one place shardkit reads
 * a private Prisma field (`_runtimeDataModel`); its shape is checked and has its own test, so a
 * Prisma upgrade that moves it fails loudly here rather than routing wrongly.
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
