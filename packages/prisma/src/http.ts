// What an HTTP API answers for an error: a service's own refusals (`ServiceError`) and shardkit's
// errors that reach the edge (a shard down or past its deadline, an idempotency key reused, an ID
// that names no shard), as one JSON shape `{ error, message, ...fields }` with its status and
// headers. No web framework here: `@shardkit/prisma/fastify` plugs it into Fastify.
import {
  isShardkitError as isAnyShardkitError,
  ShardedUUID,
  type ShardIdentifier,
  ShardkitError,
} from "@shardkit/id";
import { visit } from "jsonc-parser";
import type { z } from "zod";
import { isShardkitError } from "./errors.js";
import { isShardUnavailable, isTransientTransactionError } from "./unavailable.js";

/**
 * A refusal a service answers with: its `code`, the HTTP `status` it maps to, and extra fields of
 * the answer's body (`body`). A service declares its codes once with `serviceErrors`.
 */
export class ServiceError<Code extends string = string> extends ShardkitError<Code> {
  readonly status: number;
  /** Extra fields of the error response (`shard`, `missing`, `issues`). */
  readonly body: Record<string, unknown>;
  constructor(
    code: Code,
    status: number,
    message: string,
    body: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
    this.status = status;
    this.body = body;
  }
}

/** A refusal as a command records it (`$command`'s `refusal` option) and answers it again to every retry. */
export interface RecordedRefusal<Code extends string = string> {
  code: Code;
  message: string;
  body: Record<string, unknown>;
}

/**
 * A service's error class from its codes and their HTTP statuses, declared once:
 * `class WalletError extends serviceErrors({ VALIDATION: 400, NOT_FOUND: 404 }) {}`, thrown as
 * `new WalletError("NOT_FOUND", "wallet w-1 not found", { wallet: "w-1" })` (the third argument:
 * extra fields of the answer's body; the fourth: `{ cause }`). A command records its refusals with
 * `refusal: WalletError.refusalOf` and throws a recorded one again with `WalletError.fromRefusal`.
 */
export function serviceErrors<const Statuses extends Record<string, number>>(statuses: Statuses) {
  type Code = keyof Statuses & string;
  return class ServiceErrorOf extends ServiceError<Code> {
    static readonly statuses: Readonly<Statuses> = statuses;
    /**
     * The refusal a command records for `error` (`$command`'s `refusal` option; a plain function,
     * safe to pass as it is): an error of this class with a 4xx status, as `{ code, message, body }`.
     * Anything else (a 5xx, another error) is undefined: the command rolls back and records nothing,
     * so a retry runs it again.
     */
    static readonly refusalOf = (error: unknown): RecordedRefusal<Code> | undefined =>
      error instanceof ServiceErrorOf && error.status < 500
        ? { code: error.code, message: error.message, body: error.body }
        : undefined;
    /** The error of a recorded refusal (`outcome.refusal`), to throw again: the same answer on every retry. */
    static fromRefusal<E>(
      this: new (
        code: Code,
        message: string,
        body?: Record<string, unknown>,
      ) => E,
      refusal: unknown,
    ): E {
      const { code, message, body } = refusal as RecordedRefusal<Code>;
      return new this(code, message, body);
    }
    constructor(
      code: keyof Statuses & string,
      message: string,
      body?: Record<string, unknown>,
      options?: { cause?: unknown },
    ) {
      super(code, statuses[code]!, message, body, options);
    }
  };
}

/** A request whose input is wrong: 400 VALIDATION, listing what is wrong (`issues`, also in the body). */
export class InvalidInputError extends ServiceError<"VALIDATION"> {
  readonly issues: string[];
  constructor(issues: string[]) {
    super("VALIDATION", 400, issues.join("; "), { issues });
    this.issues = issues;
  }
}

/** A change sent without a valid `Idempotency-Key` header: 400 IDEMPOTENCY_KEY_REQUIRED. */
export class IdempotencyKeyRequiredError extends ServiceError<"IDEMPOTENCY_KEY_REQUIRED"> {
  constructor() {
    super(
      "IDEMPOTENCY_KEY_REQUIRED",
      400,
      "every change needs an Idempotency-Key header (8 to 128 letters, digits, '.', ':', '_' or '-')",
    );
  }
}

/**
 * The request's `Idempotency-Key` header (8 to 128 letters, digits, `.`, `:`, `_` or `-`) in the
 * namespace of `caller` (`"customer:c-1"`): `caller/key`, the key `$command` records. A key one
 * caller sent never meets another's: no 409 saying that someone else used it, no key taken ahead of
 * its owner. Without a valid header: `IdempotencyKeyRequiredError` (400).
 */
export function idempotencyKeyOf(
  request: { headers: Record<string, string | string[] | undefined> },
  caller: string,
): string {
  const key = request.headers["idempotency-key"];
  if (typeof key !== "string" || !/^[\w.:-]{8,128}$/.test(key)) throw new IdempotencyKeyRequiredError();
  return `${caller}/${key}`;
}

/**
 * The shard of an ID a request names (`ShardedUUID.shardOf`, then `registry.resolve`), refused in
 * the service's own terms, as errors of its `errors` class (a `serviceErrors` class declaring both
 * codes): a malformed ID is `VALIDATION` (`customer: not a valid ID`), an ID of a shard this
 * deployment lacks `NOT_FOUND` (`customer c-1 not found`: as if absent, which it is).
 */
export function shardOfId<E>(
  registry: { resolve(shard: ShardIdentifier): ShardIdentifier },
  id: string,
  what: string,
  errors: new (code: "VALIDATION" | "NOT_FOUND", message: string) => E,
): ShardIdentifier {
  try {
    return registry.resolve(ShardedUUID.shardOf(id));
  } catch (error) {
    if (isAnyShardkitError(error, "INVALID_SHARDED_ID"))
      throw new errors("VALIDATION", `${what}: not a valid ID`);
    if (isShardkitError(error, "UNKNOWN_SHARD")) throw new errors("NOT_FOUND", `${what} ${id} not found`);
    throw error;
  }
}

/** An error as an HTTP answer. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: { error: string; message: string; [field: string]: unknown };
}

/** The answer to a command whose shard did not answer in time: how to learn what happened. */
const UNKNOWN_OUTCOME =
  "the outcome is unknown (the command may have been applied); retry with the same Idempotency-Key, which returns the outcome once the shard answers";

/** Seconds a client waits before retrying a 503. */
const RETRY_AFTER = "1";

/**
 * The answer to `error`, or undefined for an error that is not a refusal (a bug: answer 500 and
 * log it). In order:
 * - a `ServiceError` (of any copy of this package): its status, code, message and body;
 * - `CommandUnavailableError`: 503 SHARD_UNAVAILABLE naming `shard`, with `outcome: "unknown"` when
 *   the command may have been applied;
 * - a shard down, past its deadline or losing races (`isShardUnavailable`,
 *   `isTransientTransactionError`): 503 SHARD_UNAVAILABLE, naming the shard when the error does;
 * - `IdempotencyConflictError`: 409 IDEMPOTENCY_CONFLICT;
 * - an ID that is not a ShardedUUID: 400 VALIDATION; an ID of a shard this deployment lacks: 404;
 * - an error carrying a 4xx `statusCode` (a framework's own: a body too large, bad JSON): that
 *   status, as VALIDATION.
 *
 * Every 503 has `Retry-After`; every 401 has `WWW-Authenticate: Bearer realm="<realm>"`.
 */
export function httpAnswerOf(error: unknown, options: { realm?: string } = {}): HttpAnswer | undefined {
  const answer = refusalOf(error);
  if (!answer) return undefined;
  const headers: Record<string, string> = {};
  if (answer.status === 503) headers["retry-after"] = RETRY_AFTER;
  if (answer.status === 401) headers["www-authenticate"] = `Bearer realm="${options.realm ?? "api"}"`;
  return { ...answer, headers };
}

function refusalOf(error: unknown): Omit<HttpAnswer, "headers"> | undefined {
  if (isServiceError(error)) {
    return { status: error.status, body: { ...error.body, error: error.code, message: error.message } };
  }
  if (isShardkitError(error, "COMMAND_UNAVAILABLE")) {
    const { shard, outcome, reason } = error;
    const unknown = outcome === "unknown";
    return unavailable(unknown ? `${reason}: ${UNKNOWN_OUTCOME}` : `${reason}; retry later`, {
      shard: shard.key,
      ...(unknown ? { outcome: "unknown" } : {}),
    });
  }
  if (isShardkitError(error, "IDEMPOTENCY_CONFLICT")) {
    return refusal(
      409,
      "IDEMPOTENCY_CONFLICT",
      "this Idempotency-Key was used with a different request or command",
    );
  }
  if (isShardUnavailable(error) || isTransientTransactionError(error)) {
    const shard = (error as { shard?: { key?: unknown } }).shard?.key;
    return typeof shard === "string"
      ? unavailable(`${whyUnavailable(error, shard)}; retry later`, { shard })
      : unavailable("a shard is unavailable or busy; retry later", {});
  }
  if (isAnyShardkitError(error, "INVALID_SHARDED_ID")) return refusal(400, "VALIDATION", error.message);
  if (isShardkitError(error, "UNKNOWN_SHARD")) return refusal(404, "NOT_FOUND", error.message);
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) {
    return refusal(status, "VALIDATION", String((error as Error).message).slice(0, 500));
  }
  return undefined;
}

/**
 * Why `shard` is unavailable, as the 503 says it: its deadline passed (`SHARD_TIMEOUT`), its
 * ownership records cannot be right (`@shardkit/ownership`'s `INVALID_MAP`: each problem, e.g. an
 * epoch set back), or, for anything else, that it is unavailable or busy.
 */
function whyUnavailable(error: unknown, shard: string): string {
  if (isShardkitError(error, "SHARD_TIMEOUT")) return (error as Error).message;
  const issues = (error as { issues?: unknown }).issues;
  if (isAnyShardkitError(error, "INVALID_MAP") && Array.isArray(issues))
    return `shard ${shard}: its ownership records cannot be right (${issues.join("; ")})`;
  return `shard ${shard} is unavailable or busy`;
}

const refusal = (status: number, code: string, message: string) => ({
  status,
  body: { error: code, message },
});
const unavailable = (message: string, fields: Record<string, unknown>) => ({
  status: 503,
  body: { ...fields, error: "SHARD_UNAVAILABLE", message },
});

/** A ServiceError of this copy of the package or another one (a shardkit error with an HTTP status). */
function isServiceError(error: unknown): error is ServiceError {
  if (error instanceof ServiceError) return true;
  const { status, body } = (error ?? {}) as { status?: unknown; body?: unknown };
  return (
    isAnyShardkitError(error) &&
    Number.isInteger(status) &&
    (status as number) >= 400 &&
    (status as number) < 600 &&
    typeof body === "object" &&
    body !== null
  );
}

/** At most this many problems, each at most 200 characters, reach an answer: it stays small whatever the input. */
const MAX_ISSUES = 10;

/**
 * `value` parsed by the zod `schema`, or `InvalidInputError` (400 VALIDATION) listing what is wrong:
 * at most ten issues, each at most 200 characters, as `path: message`.
 */
export function parseInput<T>(schema: z.ZodType<T, unknown>, value: unknown): T {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const clip = (text: string) => (text.length > 200 ? `${text.slice(0, 197)}...` : text);
  const all = result.error.issues;
  const issues = all
    .slice(0, MAX_ISSUES)
    .map((i) => clip(`${i.path.map(String).join(".") || "body"}: ${i.message}`));
  if (all.length > MAX_ISSUES) issues.push(`and ${all.length - MAX_ISSUES} more`);
  throw new InvalidInputError(issues);
}

/** A lone UTF-16 surrogate: text PostgreSQL would store altered (pairs are fine). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The first string in `value` (a request's body, query or params, keys included) that PostgreSQL
 * would refuse (a NUL character) or a client would get back altered (a lone UTF-16 surrogate), as
 * `path: what is wrong`; undefined when there is none.
 */
export function badTextIn(value: unknown, path: string, depth = 0): string | undefined {
  if (typeof value === "string") {
    if (value.includes("\0")) return `${path}: must not contain NUL characters`;
    if (LONE_SURROGATE.test(value)) return `${path}: must not contain lone surrogates (not valid Unicode)`;
    return undefined;
  }
  if (value === null || typeof value !== "object" || depth > 20) return undefined;
  for (const [key, inner] of Object.entries(value)) {
    const found = badTextIn(key, path, depth + 1) ?? badTextIn(inner, `${path}.${key}`, depth + 1);
    if (found) return found;
  }
  return undefined;
}

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
