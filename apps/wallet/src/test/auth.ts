import { createAuth } from "../auth.js";

/** The secret the tests sign credentials with (a real deployment sets WALLET_AUTH_SECRET). */
export const TEST_SECRET = "wallet-tests-secret-0123456789abcdef";
export const auth = createAuth(TEST_SECRET);
/** An operator's credential: every route. */
export const operator = await auth.issue({ role: "admin", subject: "tests" });
/** The Authorization header of `token`. */
export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
