import type { TestProject } from "vitest/node";
import { ensureMachineNats } from "./nats-server.js";

/**
 * What the release check (src/package.test.ts) needs when it runs in the release lane, without the
 * tests' global setup: the machine's NATS server, which its README example consumes from. No
 * database: the release lane never touches what the test lanes' setups made.
 */
export default async function setup(project: TestProject) {
  project.provide("natsUrl", await ensureMachineNats());
}
