// The model operations of a Prisma 7 client for PostgreSQL, by what routing does with them.

/** Reads that can run over several databases and merge exactly. */
export const SCATTER_READS = new Set([
  "findMany",
  "findFirst",
  "findFirstOrThrow",
  "count",
  "aggregate",
  "groupBy",
]);
export const READS = new Set([...SCATTER_READS, "findUnique", "findUniqueOrThrow"]);
export const WRITES = new Set([
  "create",
  "createMany",
  "createManyAndReturn",
  "update",
  "updateMany",
  "updateManyAndReturn",
  "upsert",
  "delete",
  "deleteMany",
]);
/** Every model operation of a Prisma 7 client for PostgreSQL. */
export const OPERATIONS = new Set([...READS, ...WRITES]);
