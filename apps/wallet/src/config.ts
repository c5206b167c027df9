import { z } from "zod";

const ms = (fallback: number) => z.coerce.number().int().min(1).max(3_600_000).default(fallback);

const schema = z.object({
  SHARDKIT_SHARDS: z.string().optional(),
  /** The secret the service's credentials are signed with (HS256): required, at least 32 characters. */
  WALLET_AUTH_SECRET: z
    .string({ error: "required: the secret credentials are signed with (at least 32 characters)" })
    .min(32, { error: "must be at least 32 characters (256 bits for HS256)" }),
  PORT: z.coerce.number().int().min(0).max(65_535).default(3000),
  /** How long a call waits for its shard's database before answering 503. */
  WALLET_DEADLINE_MS: ms(5000),
  RELAY_POLL_INTERVAL_MS: ms(200),
  /** Attempts before an event whose delivery keeps failing with an error retrying cannot fix is dead. */
  RELAY_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(1000).default(10),
  RELAY_BACKOFF_BASE_MS: ms(500),
  RELAY_BACKOFF_MAX_MS: ms(60_000),
  RELAY_DELIVERY_TIMEOUT_MS: ms(10_000),
  RELAY_LEASE_MS: ms(60_000),
});

export type ServerConfig = z.output<typeof schema>;

/**
 * The service's settings from its environment, every one but WALLET_AUTH_SECRET optional. A value
 * that does not parse stops the start with an error naming the variable, never a silent default.
 */
export function serverConfig(env: Record<string, string | undefined>): ServerConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new Error(`wallet service: bad environment:\n  - ${problems.join("\n  - ")}`);
  }
  if (parsed.data.RELAY_LEASE_MS <= parsed.data.RELAY_DELIVERY_TIMEOUT_MS) {
    throw new Error(
      "wallet service: bad environment:\n  - RELAY_LEASE_MS: must be longer than RELAY_DELIVERY_TIMEOUT_MS",
    );
  }
  return parsed.data;
}
