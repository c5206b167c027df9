import type { FastifyInstance } from "fastify";
import { visit } from "jsonc-parser";

/**
 * The path of the first key that a JSON object in `text` gives twice (`amount`, `items.sku`), or
 * undefined. JSON.parse keeps the last one silently: `{"amount":1,"amount":1000000000000}` would
 * move the second amount while a log or a proxy that reads the first shows the other.
 */
export function duplicateKey(text: string): string | undefined {
  const join = (path: string, key: string) => (path ? `${path}.${key}` : key);
  // Each open object: its keys so far, its path, and the key whose value is being read.
  const objects: { keys: Set<string>; path: string; property: string }[] = [];
  let found: string | undefined;
  visit(text, {
    onObjectBegin: () => {
      const parent = objects.at(-1);
      objects.push({ keys: new Set(), path: parent ? join(parent.path, parent.property) : "", property: "" });
    },
    onObjectProperty: (name) => {
      const object = objects.at(-1)!;
      if (object.keys.has(name)) found ??= join(object.path, name);
      object.keys.add(name);
      object.property = name;
    },
    onObjectEnd: () => {
      objects.pop();
    },
  });
  return found;
}

/**
 * Replaces Fastify's JSON body parser with one that refuses an object giving a key twice (through
 * `refuse`, a 400 naming the key) and otherwise parses as Fastify does (prototype poisoning refused).
 */
export function refuseDuplicateKeys(app: FastifyInstance, refuse: (message: string) => Error): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const key = typeof body === "string" ? duplicateKey(body) : undefined;
    if (key !== undefined) return done(refuse(`${key}: given twice in the body (each key once)`), undefined);
    return parse(request, body as string, done);
  });
}
