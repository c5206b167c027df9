// The orders service's credentials: HS256 tokens of audience `shardkit-orders`, signed with
// ORDERS_AUTH_SECRET (service-kit's auth.ts checks and issues them).
import { createServiceAuth, type PrincipalOf, type ServiceAuth } from "@shardkit/service-kit/auth";
import { OrdersError } from "./errors.js";

/** The roles besides `admin`, and the field of the principal each one's subject goes in. */
export const ROLES = { customer: "customerId" } as const;

/**
 * Who is calling: an operator of the service (`admin`: every route), or a customer (only itself
 * and its own orders).
 */
export type Principal = PrincipalOf<typeof ROLES>;
export type Auth = ServiceAuth<Principal>;

/** The credentials of tokens signed with `secret`: the service checks them; `npm run token` issues some. */
export const createAuth = (secret: string): Auth =>
  createServiceAuth(secret, { audience: "shardkit-orders", roles: ROLES, errors: OrdersError });
