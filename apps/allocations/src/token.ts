// Prints a credential for the allocations service (`npm run token -- --desk <name>` or
// `npm run token -- --admin <name>`), signed with ALLOCATIONS_AUTH_SECRET: for trying the API by hand
// and for scripts. In production, issue tokens where you authenticate people, with the same secret.
import { tokenCommand } from "@shardkit/service-kit/token";
import { createAuth, ROLES } from "./auth.js";

await tokenCommand({ secretVariable: "ALLOCATIONS_AUTH_SECRET", roles: ROLES, createAuth });
