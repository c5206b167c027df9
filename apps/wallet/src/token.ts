// Prints a credential for the wallet service (`npm run token -- --customer <id>` or
// `npm run token -- --admin <name>`), signed with WALLET_AUTH_SECRET: for trying the API by hand
// and for scripts. In production, issue tokens where you authenticate people, with the same secret.
import { tokenCommand } from "@shardkit/service-kit/token";
import { createAuth, ROLES } from "./auth.js";

await tokenCommand({ secretVariable: "WALLET_AUTH_SECRET", roles: ROLES, createAuth });
