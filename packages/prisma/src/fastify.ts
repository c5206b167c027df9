// The `@shardkit/prisma/fastify` entry: what a Fastify service on shards answers when something is
// wrong, in one call. Fastify is an optional peer dependency, used for its types only.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { badTextIn, duplicateKey, httpAnswerOf, InvalidInputError } from "./http.js";

export {
  badTextIn,
  duplicateKey,
  type HttpAnswer,
  httpAnswerOf,
  IdempotencyKeyRequiredError,
  InvalidInputError,
  idempotencyKeyOf,
  parseInput,
  type RecordedRefusal,
  ServiceError,
  serviceErrors,
  shardOfId,
} from "./http.js";

/** Options of `shardkitHttp`. */
export interface ShardkitHttpOptions {
  /** The realm a 401 names in `WWW-Authenticate: Bearer realm="..."`. Default "api". */
  realm?: string;
}

/**
 * Sets `app` up to answer every error as `{ error, message, ...fields }` with the right status
 * (`httpAnswerOf`): a service's `ServiceError`s, a shard down or past its deadline (503 naming the
 * shard, with `Retry-After`), an idempotency key reused (409), a malformed ID (400), an ID of a
 * shard this deployment lacks (404); anything else is logged and answered 500 INTERNAL, its
 * message withheld. Also refuses, with 400 VALIDATION naming the place: a JSON body whose object
 * gives a key twice (JSON.parse would keep the last silently), and text PostgreSQL would refuse or
 * alter (a NUL character, a lone surrogate) anywhere in the body, the query or the path.
 */
export function shardkitHttp(app: FastifyInstance, options: ShardkitHttpOptions = {}): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const key = typeof body === "string" ? duplicateKey(body) : undefined;
    if (key !== undefined) {
      return done(new InvalidInputError([`${key}: given twice in the body (each key once)`]), undefined);
    }
    return parse(request, body as string, done);
  });
  app.addHook("preValidation", async (request) => {
    const found =
      badTextIn(request.body, "body") ??
      badTextIn(request.query, "query") ??
      badTextIn(request.params, "params");
    if (found) throw new InvalidInputError([found]);
  });
  app.setErrorHandler((error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) => {
    const answer = httpAnswerOf(error, options);
    if (answer) return reply.code(answer.status).headers(answer.headers).send(answer.body);
    request.log.error(error);
    return reply.code(500).send({ error: "INTERNAL", message: "internal error" });
  });
}

/**
 * Answers a command's outcome (`$command`'s `{ result, replayed }`) with `status`; a replayed one
 * (a retry with the same Idempotency-Key) carries `Idempotent-Replayed: true`.
 */
export function replyOutcome<T>(
  reply: FastifyReply,
  status: number,
  outcome: { result: T; replayed: boolean },
) {
  if (outcome.replayed) reply.header("idempotent-replayed", "true");
  return reply.code(status).send(outcome.result);
}
