// The allocations service's credentials: HS256 tokens of audience `shardkit-allocations`, signed with
// ALLOCATIONS_AUTH_SECRET (service-kit's auth.ts checks and issues them).
import { createServiceAuth, type PrincipalOf, type ServiceAuth } from "@shardkit/service-kit/auth";
import { AllocationsError } from "./errors.js";

/** The roles besides `admin`, and the field of the principal each one's subject goes in. */
export const ROLES = { desk: "desk" } as const;

/**
 * Who is calling: an operator of the service (`admin`: every route, including creating buckets),
 * or a desk (holds and confirms units as itself only, and reads buckets).
 */
export type Principal = PrincipalOf<typeof ROLES>;
export type Auth = ServiceAuth<Principal>;

/** The credentials of tokens signed with `secret`: the service checks them; `npm run token` issues some. */
export const createAuth = (secret: string): Auth =>
  createServiceAuth(secret, { audience: "shardkit-allocations", roles: ROLES, errors: AllocationsError });
