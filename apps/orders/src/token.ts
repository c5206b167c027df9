// Prints a credential for the orders service (`npm run token -- --customer <id>` or
// `npm run token -- --admin <name>`), signed with ORDERS_AUTH_SECRET: for trying the API by hand
// and for scripts. In production, issue tokens where you authenticate people, with the same secret.
import { parseArgs } from "node:util";
import { createAuth } from "./auth.js";

const { values } = parseArgs({
  options: {
    customer: { type: "string" },
    admin: { type: "string" },
    expires: { type: "string", default: "1h" },
  },
});
const secret = process.env.ORDERS_AUTH_SECRET;
if (!secret) {
  console.error("token: set ORDERS_AUTH_SECRET (the secret the service checks tokens with)");
  process.exit(2);
}
if ((values.customer === undefined) === (values.admin === undefined)) {
  console.error("token: give one of --customer <customerId> or --admin <name>");
  process.exit(2);
}
const auth = createAuth(secret);
const token = await auth.issue(
  values.admin !== undefined
    ? { role: "admin", subject: values.admin }
    : { role: "customer", customerId: values.customer! },
  values.expires,
);
process.stdout.write(`${token}\n`);
