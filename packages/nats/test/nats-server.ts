// NATS servers for the tests: the machine's own (127.0.0.1:4222, started if it is down) and
// private ones a test can stop and start again, each on its own free port and store directory.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@shardkit/vitest-config/eventually";

export const MACHINE_NATS = { host: "127.0.0.1", port: 4222 };
const BINARY = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].find((p) =>
  existsSync(p),
);

/** True when something accepts TCP connections on host:port (within 1 s). */
export function listening(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
    socket.connect(port, host);
  });
}

/** The machine's NATS server with JetStream: started (as the machine starts it) when it is down. */
export async function ensureMachineNats(): Promise<string> {
  const url = `nats://${MACHINE_NATS.host}:${MACHINE_NATS.port}`;
  if (await listening(MACHINE_NATS.host, MACHINE_NATS.port)) return url;
  if (!BINARY) throw new Error("no nats-server on this machine and nothing listens on 127.0.0.1:4222");
  execFileSync("start-stop-daemon", [
    "--start",
    "--oknodo",
    "--background",
    "--exec",
    BINARY,
    "--",
    "-a",
    MACHINE_NATS.host,
    "-p",
    String(MACHINE_NATS.port),
    "-js",
    "-sd",
    "/var/lib/nats-server",
    "-l",
    "/var/log/nats-server.log",
  ]);
  await eventually("the NATS server listens on 127.0.0.1:4222", () =>
    listening(MACHINE_NATS.host, MACHINE_NATS.port),
  );
  return url;
}

/** A port nothing listens on right now (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * A NATS server of a test's own, with JetStream and a store directory that survives `stop()`:
 * `stop()` kills it (SIGKILL, as a crash), `start()` starts it again on the same port and store.
 */
export async function privateNatsServer() {
  if (!BINARY) throw new Error("no nats-server binary on this machine");
  const port = await freePort();
  const store = mkdtempSync(join(tmpdir(), "sk-nats-"));
  let child: ChildProcess | undefined;
  const start = () =>
    new Promise<void>((resolve, reject) => {
      const proc = spawn(BINARY, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", store], {
        stdio: ["ignore", "ignore", "pipe"],
      });
      child = proc;
      let log = "";
      const timer = setTimeout(() => {
        proc.kill("SIGKILL");
        reject(new Error(`nats-server on ${port} was not ready within 15 s:\n${log}`));
      }, 15_000);
      proc.stderr!.on("data", (chunk: Buffer) => {
        log += chunk.toString();
        if (log.includes("Server is ready")) {
          clearTimeout(timer);
          resolve();
        }
      });
      proc.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`nats-server on ${port} exited (${code}):\n${log}`));
      });
    });
  const stop = async () => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((resolve) => proc.once("exit", resolve));
    proc.kill("SIGKILL");
    await exited;
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    start,
    stop,
    async dispose() {
      await stop();
      rmSync(store, { recursive: true, force: true });
    },
  };
}
