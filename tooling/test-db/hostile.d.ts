// The types of hostile.js (see there); also every create-shardkit template's src/test/hostile.d.ts.
/** Each byte of `value` percent-encoded: a path segment or a query value exactly as given. */
export declare const escaped: (value: string) => string;

/** A request run before the random ones (`checkHostileInput`'s `examples`). */
export interface HostileExample {
  /** A key of `routes`, such as "GET /wallets/:id". */
  route: string;
  /** The body (default: the route's valid one). */
  body?: unknown;
  /** What stands for `:id`: a stand-in of `known` or an ID (default "x"). */
  id?: string;
  query?: Record<string, unknown>;
  /** A name of `credentials`, or null for none. */
  credential?: string | null;
  /** The Idempotency-Key (default one of its own), or null for none. */
  key?: string | null;
}

export interface HostileInputOptions {
  /** Each route ("POST /customers/:id/wallets"), with a body it takes (stand-ins of `known` allowed). */
  routes: Record<string, Record<string, unknown>>;
  /** The API's body field names. */
  fields: string[];
  /** Stand-ins for the IDs (and cursors) made before the run, replaced by them wherever they are drawn. */
  known: Record<string, string>;
  /** Credentials by name (the tokens), an operator's first. */
  credentials: Record<string, string>;
  /** An ID of the shard with these bits (0 to 16383), such as `ShardedUUID.generate(ShardIdentifier.fromBits(bits))`. */
  shardedId: (bits: number) => string;
  /** More strings the service's input looks like (dates, codes). */
  texts?: string[];
  /** A body field may also be a list of records over these fields (an order's items). */
  itemFields?: string[];
  /** The query parameters of the GET routes, values they take, and the stand-ins of `known` that are cursors. */
  query?: { names: string[]; values?: string[]; cursors?: string[] };
  /**
   * Requests run first, beside the ones every service gets (each route valid as the first
   * credential and without one, the first POST route with an empty body): what needs the service's
   * knowledge, such as a route a credential may not use (403) or another caller's data (404).
   */
  examples?: HostileExample[];
  numRuns?: number;
}

/** A Fastify app (what `checkHostileInput` uses of it). */
export interface Injectable {
  inject(request: {
    method: "GET" | "POST";
    url: string;
    headers: Record<string, string>;
    payload?: string;
  }): Promise<{ statusCode: number; body: string; json(): any }>;
}

/**
 * Sends `numRuns` (default 1,000) hostile requests to `app` and checks every answer: a 2xx, a 4xx
 * naming the problem, or a 503 naming the shard, never a 500, and no stack trace, SQL or connection
 * string in an error body. Examples run first (see `examples`). Resolves to the statuses seen.
 */
export declare function checkHostileInput(
  app: Injectable,
  options: HostileInputOptions,
): Promise<Set<number>>;
