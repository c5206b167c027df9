// A service's credentials: HS256 tokens (`Authorization: Bearer <token>`) whose `sub` names who
// calls and whose `role` says as what. An operator (`admin`) is `{ role: "admin", subject }`; every
// other role the service knows names its subject by a field of its own (a customer's `customerId`,
// a desk's `desk`), as `roles` maps them.
import { errors, jwtVerify, SignJWT } from "jose";

/** The roles a service knows besides `admin`, each with the field of the principal its subject goes in. */
export type Roles = Record<string, string>;

/** Who is calling: an operator, or one of the service's `roles` (`{ role: "customer", customerId }`). */
export type PrincipalOf<R extends Roles> =
  | { role: "admin"; subject: string }
  | { [Role in keyof R & string]: { role: Role } & { [Field in R[Role]]: string } }[keyof R & string];

/** Signs and checks the service's credentials. */
export interface ServiceAuth<P> {
  /** The caller of a request, from its Authorization header; 401 when there is none or it is not valid. */
  verify(authorization: string | undefined): Promise<P>;
  /** A token for `principal`, valid for `expiresIn` (a jose time span such as "15m", default "1h"). */
  issue(principal: P, expiresIn?: string): Promise<string>;
}

/** A secret shorter than this is refused: HS256 wants at least 256 bits. */
export const MIN_SECRET_LENGTH = 32;

export interface AuthOptions<R extends Roles> {
  /** The audience every token of this service names: a token made for another service is refused. */
  audience: string;
  roles: R;
  /** The service's error class (`serviceErrors`), which answers UNAUTHENTICATED with 401. */
  errors: new (
    code: "UNAUTHENTICATED",
    message: string,
  ) => Error;
}

/** The role and subject a principal's token carries. */
export function claimsOf(principal: { role: string }, roles: Roles): { role: string; subject: string } {
  const field = principal.role === "admin" ? "subject" : roles[principal.role];
  const subject = field === undefined ? undefined : (principal as Record<string, unknown>)[field];
  if (typeof subject !== "string") throw new TypeError(`no subject for the role ${principal.role}`);
  return { role: principal.role, subject };
}

/**
 * The credentials of a service whose tokens are signed with `secret` (its `*_AUTH_SECRET`). Issue
 * them where you authenticate people (your login, an identity provider's callback) or with
 * `npm run token`; the service only checks them.
 */
export function createServiceAuth<const R extends Roles>(
  secret: string,
  options: AuthOptions<R>,
): ServiceAuth<PrincipalOf<R>> {
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new Error(`the auth secret must be at least ${MIN_SECRET_LENGTH} characters long`);
  }
  const { audience, roles, errors: ServiceError } = options;
  const unauthenticated = (message: string) => new ServiceError("UNAUTHENTICATED", message);
  const key = new TextEncoder().encode(secret);
  return {
    async verify(authorization) {
      const match = /^Bearer ([\w-]+\.[\w-]+\.[\w-]+)$/.exec(authorization ?? "");
      if (!match) throw unauthenticated("this route needs a credential: Authorization: Bearer <token>");
      let payload: Record<string, unknown>;
      try {
        ({ payload } = await jwtVerify(match[1]!, key, {
          algorithms: ["HS256"],
          audience,
          requiredClaims: ["sub", "exp"],
        }));
      } catch (error) {
        if (error instanceof errors.JWTExpired) throw unauthenticated("the credential has expired");
        throw unauthenticated("the credential is not valid");
      }
      const { sub: subject, role } = payload;
      if (typeof subject !== "string" || subject === "")
        throw unauthenticated("the credential names no subject");
      if (role === "admin") return { role, subject };
      const field = typeof role === "string" && Object.hasOwn(roles, role) ? roles[role] : undefined;
      if (field === undefined) throw unauthenticated("the credential names no role this service knows");
      return { role, [field]: subject } as PrincipalOf<R>;
    },
    issue(principal, expiresIn = "1h") {
      const { role, subject } = claimsOf(principal, roles);
      return new SignJWT({ role })
        .setProtectedHeader({ alg: "HS256" })
        .setSubject(subject)
        .setAudience(audience)
        .setIssuedAt()
        .setExpirationTime(expiresIn)
        .sign(key);
    },
  };
}
