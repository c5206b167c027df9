// Embedded PGlite databases for tests, each a copy of a data directory made once per process:
// a new PGlite runs initdb inside WebAssembly (seconds of CPU), loading a dump takes a fraction.
import { PGlite, type PGliteOptions } from "@electric-sql/pglite";

const templates: Promise<Blob>[] = [];

/** Template `i`'s data directory, dumped: its own initdb, so a system identifier of its own. */
function template(i: number): Promise<Blob> {
  templates[i] ??= (async () => {
    const db = await PGlite.create();
    try {
      return await db.dumpDataDir("none");
    } finally {
      await db.close();
    }
  })();
  return templates[i];
}

/**
 * A new, empty PGlite database (in memory, or in `options.dataDir`), a copy of template `i`:
 * nothing one copy writes is seen by another. Copies of different templates are told apart as
 * different servers (their system identifiers differ); copies of one template are twins.
 */
export async function freshPGlite(i: number, options: PGliteOptions = {}): Promise<PGlite> {
  const db = new PGlite({ ...options, loadDataDir: await template(i) });
  await db.waitReady;
  return db;
}
