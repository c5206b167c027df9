import { errors, jwtVerify, SignJWT } from "jose";
import { WalletError } from "./errors.js";

/**
 * Who is calling: an operator of the service (`admin`: every route), or a customer (only its own
 * wallets and the transfers that leave them).
 */
export type Principal = { role: "admin"; subject: string } | { role: "customer"; customerId: string };

/** Signs and checks the service's credentials: HS256 tokens (`Authorization: Bearer <token>`). */
export interface Auth {
  /** The caller of a request, from its Authorization header; 401 when there is none or it is not valid. */
  verify(authorization: string | undefined): Promise<Principal>;
  /** A token for `principal`, valid for `expiresIn` (a jose time span such as "15m", default "1h"). */
  issue(principal: Principal, expiresIn?: string): Promise<string>;
}

/** The audience every token of this service names: a token made for another service is refused. */
const AUDIENCE = "shardkit-wallet";
/** A secret shorter than this is refused: HS256 wants at least 256 bits. */
export const MIN_SECRET_LENGTH = 32;

const unauthenticated = (message: string) => new WalletError("UNAUTHENTICATED", message);

/**
 * The credentials of a service whose tokens are signed with `secret` (WALLET_AUTH_SECRET). Issue
 * them where you authenticate people (your login, an identity provider's callback) or with
 * `npm run token`; the service only checks them.
 */
export function createAuth(secret: string): Auth {
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new Error(`the auth secret must be at least ${MIN_SECRET_LENGTH} characters long`);
  }
  const key = new TextEncoder().encode(secret);
  return {
    async verify(authorization) {
      const match = /^Bearer ([\w-]+\.[\w-]+\.[\w-]+)$/.exec(authorization ?? "");
      if (!match) throw unauthenticated("this route needs a credential: Authorization: Bearer <token>");
      let payload: Record<string, unknown>;
      try {
        ({ payload } = await jwtVerify(match[1]!, key, {
          algorithms: ["HS256"],
          audience: AUDIENCE,
          requiredClaims: ["sub", "exp"],
        }));
      } catch (error) {
        if (error instanceof errors.JWTExpired) throw unauthenticated("the credential has expired");
        throw unauthenticated("the credential is not valid");
      }
      const subject = payload.sub;
      if (typeof subject !== "string" || subject === "")
        throw unauthenticated("the credential names no subject");
      if (payload.role === "admin") return { role: "admin", subject };
      if (payload.role === "customer") return { role: "customer", customerId: subject };
      throw unauthenticated("the credential names no role this service knows");
    },
    issue(principal, expiresIn = "1h") {
      const subject = principal.role === "admin" ? principal.subject : principal.customerId;
      return new SignJWT({ role: principal.role })
        .setProtectedHeader({ alg: "HS256" })
        .setSubject(subject)
        .setAudience(AUDIENCE)
        .setIssuedAt()
        .setExpirationTime(expiresIn)
        .sign(key);
    },
  };
}
