// Prints a credential for the allocations service (`npm run token -- --desk <name>` or
// `npm run token -- --admin <name>`), signed with ALLOCATIONS_AUTH_SECRET: for trying the API by
// hand and for scripts. In production, issue tokens where you authenticate people, with the same secret.
import { parseArgs } from "node:util";
import { createAuth } from "./auth.js";

const { values } = parseArgs({
  options: {
    desk: { type: "string" },
    admin: { type: "string" },
    expires: { type: "string", default: "1h" },
  },
});
const secret = process.env.ALLOCATIONS_AUTH_SECRET;
if (!secret) {
  console.error("token: set ALLOCATIONS_AUTH_SECRET (the secret the service checks tokens with)");
  process.exit(2);
}
if ((values.desk === undefined) === (values.admin === undefined)) {
  console.error("token: give one of --desk <name> or --admin <name>");
  process.exit(2);
}
const auth = createAuth(secret);
const token = await auth.issue(
  values.admin !== undefined
    ? { role: "admin", subject: values.admin }
    : { role: "desk", desk: values.desk! },
  values.expires,
);
process.stdout.write(`${token}\n`);
