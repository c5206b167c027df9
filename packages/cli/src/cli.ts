#!/usr/bin/env node
// The `shardkit` binary: `run` with the process's arguments and streams; its exit code is the process's.
import { setFlagsFromString } from "node:v8";
import { run } from "./run.js";

// Prisma's query compiler is WebAssembly. A command runs a few queries: V8's optimizing tier would
// compile it again in the background, and the process could not exit before that ends (about a
// second here). The baseline compiler alone starts and ends the command sooner.
setFlagsFromString("--liftoff-only");

// A question abandoned at its timeout (a database that does not answer) may fail later, after its
// command has moved on: say so, but let the command finish and print its report.
process.on("unhandledRejection", (reason) => {
  process.stderr.write(
    `shardkit: a background query failed: ${reason instanceof Error ? reason.message.trim().split("\n").at(-1) : String(reason)}\n`,
  );
});

void run(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
  // Database pools close on their own; should one linger, it must not keep a finished command running.
  setTimeout(() => process.exit(code), 2000).unref();
});
