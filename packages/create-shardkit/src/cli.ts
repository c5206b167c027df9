#!/usr/bin/env node
// The `create-shardkit` binary (`npm create shardkit`): `run` with the process's arguments; its exit code is the process's.
import { run } from "./run.js";

void run(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
