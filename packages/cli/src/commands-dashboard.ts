// `shardkit dashboard`: its flags, and how it calls `dashboard/server.ts` (imported when it runs).
// It runs until Ctrl-C (or the io's signal), then closes: a balance under way ends its move first.
import { Option } from "commander";
import type { CommandContext } from "./cli-io.js";
import { byOption, collect, port, positiveInt } from "./flags.js";

const TOKEN_VARIABLE = "SHARDKIT_DASHBOARD_TOKEN";

/** What `dashboard` reports once it stopped. */
export interface DashboardReport {
  ok: boolean;
  url: string;
}

/**
 * Adds `dashboard` to `program` (`common`: the flags every command has; `config`: where the configuration is read).
 * Longer than 80 lines: the command's flags and help, in the order `--help` lists them.
 */
export function addDashboardCommand({ program, io, execute, common, config }: CommandContext): void {
  type Flags = {
    config?: string;
    host: string;
    port: number;
    token?: string;
    allowActions?: boolean;
    refresh: number;
    window: number;
    by: "time" | "calls" | "writes";
    timeout: number;
    table?: string[];
    mode: "live" | "offline";
    maxStreams: number;
  };
  common(program.command("dashboard"))
    .description(
      "a web page of the shard map, load, health, moves and the balancer's plan, updating itself (read-only unless --allow-actions)",
    )
    .option("--host <address>", "the address to listen on; any but the loopback needs a token", "127.0.0.1")
    .option("--port <n>", "the port (0: any free one)", port("--port"), 7420)
    .option("--token <secret>", `required of every request (default: $${TOKEN_VARIABLE})`)
    .option(
      "--allow-actions",
      "the page may run the plan it shows, pause and resume it, and drain a database",
    )
    .option("--refresh <ms>", "how often the page is updated", positiveInt("--refresh"), 2000)
    .option(
      "--window <ms>",
      "the load shown: what routers recorded in the last <ms>",
      positiveInt("--window"),
      300_000,
    )
    .addOption(byOption())
    .option(
      "--timeout <ms>",
      "how long each database may take to answer each read",
      positiveInt("--timeout"),
      5000,
    )
    .option(
      "--table <Table[:column[:bits]]>",
      "a table of yours holding shard rows (repeat for each), as for move: the balancer's sizes and moves",
      collect,
    )
    .option(
      "--max-streams <n>",
      "event streams (open pages) one client address may hold; each costs at most one snapshot of memory",
      positiveInt("--max-streams"),
      16,
    )
    .addOption(
      new Option("--mode <mode>", "how moves started from the page copy: live or offline")
        .choices(["live", "offline"])
        .default("live"),
    )
    .addHelpText(
      "after",
      `\nExample: shardkit dashboard --table Wallet --allow-actions\nIt prints the address to open; Ctrl-C stops it. Another --host needs --token or $${TOKEN_VARIABLE}.`,
    )
    .action(
      execute<Flags, DashboardReport>("dashboard", async (o) => {
        const { startDashboard } = await import("./dashboard/server.js");
        const token = o.token ?? io.env?.[TOKEN_VARIABLE];
        const dashboard = await startDashboard({
          ...config(o),
          host: o.host,
          port: o.port,
          ...(token !== undefined ? { token } : {}),
          allowActions: o.allowActions ?? false,
          refreshMs: o.refresh,
          windowMs: o.window,
          by: o.by,
          timeoutMs: o.timeout,
          tables: o.table ?? [],
          mode: o.mode,
          maxStreams: o.maxStreams,
        });
        const down = dashboard.snapshot().databases.filter((d) => !d.up);
        for (const d of down)
          io.stderr.write(
            `shardkit dashboard: ${d.name} does not answer (${d.error}); its column shows it down\n`,
          );
        io.stderr.write(
          `shardkit dashboard: ${dashboard.url}${o.allowActions ? " (actions allowed)" : " (read-only)"}; Ctrl-C stops it\n`,
        );
        await new Promise<void>((resolve) => {
          const stop = () => {
            process.off("SIGINT", stop);
            process.off("SIGTERM", stop);
            resolve();
          };
          if (io.signal?.aborted) return stop();
          io.signal?.addEventListener("abort", stop, { once: true });
          process.on("SIGINT", stop);
          process.on("SIGTERM", stop);
        });
        const moving = dashboard.running();
        if (moving)
          io.stderr.write(
            `shardkit dashboard: stopping after the move under way (${moving.shard} ${moving.from} -> ${moving.to}); Ctrl-C again to exit now\n`,
          );
        await dashboard.close();
        return [
          { ok: true, url: dashboard.url.replace(/\?token=.*$/, "") },
          () => "shardkit dashboard: stopped\n",
        ];
      }),
    );
}
