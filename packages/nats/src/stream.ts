import { jetstreamManager, type StreamConfig, type StreamInfo } from "@nats-io/jetstream";
import { type NatsConnection, nanos } from "@nats-io/nats-core";
import { describeError, errorName, JetStreamSetupError, NatsOptionsError } from "./errors.js";
import { invalidSubject } from "./sink.js";

export interface EnsureStreamOptions {
  /** The stream's name. */
  name: string;
  /** Subjects it captures, e.g. `["outbox.>"]` for the sink's default subjects. */
  subjects: string[];
  /**
   * How long JetStream remembers a `Nats-Msg-Id` to drop a second copy: the relay's redeliveries
   * that arrive later are stored again (consumers recognise them with `consumeOnce`). Make it
   * longer than an event can stay in flight: the relay's `leaseMs` plus its backoff. Default 2 minutes
   * (JetStream's own default).
   */
  duplicateWindowMs?: number;
  /** Anything else of JetStream's stream configuration (storage, retention, max_age, replicas, ...). */
  config?: Omit<Partial<StreamConfig>, "name" | "subjects" | "duplicate_window">;
}

const STREAM_NOT_FOUND = 10059;

/**
 * Creates the stream when it does not exist. When it does, adds the subjects it lacks and lengthens
 * its duplicate window when shorter than asked (never shortens it, never removes a subject), and
 * leaves the rest of its configuration as it is. Returns the stream's info.
 */
export async function ensureStream(
  connection: NatsConnection,
  options: EnsureStreamOptions,
): Promise<StreamInfo> {
  const windowMs = options?.duplicateWindowMs ?? 120_000;
  const issues: string[] = [];
  if (typeof options?.name !== "string" || !/^[^\s.*>/\\]+$/.test(options.name)) {
    issues.push(`name ${JSON.stringify(options?.name)} is not a stream name`);
  }
  if (!Array.isArray(options?.subjects) || options.subjects.length === 0) {
    issues.push("subjects must list at least one subject");
  } else {
    for (const s of options.subjects) {
      // Wildcards are allowed here (a stream captures `outbox.>`); only the shape is checked.
      const why = invalidSubject(typeof s === "string" ? s.replace(/(^|\.)[*>](?=\.|$)/g, "$1w") : s);
      if (why) issues.push(`subject ${JSON.stringify(s)}: ${why}`);
    }
  }
  if (!(Number.isFinite(windowMs) && windowMs >= 100)) {
    issues.push(
      `duplicateWindowMs must be at least 100 ms, got ${JSON.stringify(options?.duplicateWindowMs)}`,
    );
  }
  if (issues.length > 0) throw new NatsOptionsError(issues);
  const window = nanos(windowMs);
  const setup = (what: string, error: unknown) =>
    new JetStreamSetupError(`stream ${options.name}: ${what}: ${describeError(error)}`, { cause: error });

  let jsm: Awaited<ReturnType<typeof jetstreamManager>>;
  try {
    jsm = await jetstreamManager(connection);
  } catch (error) {
    throw setup("JetStream is not available", error);
  }
  for (let attempt = 0; ; attempt++) {
    let info: StreamInfo | undefined;
    try {
      info = await jsm.streams.info(options.name);
    } catch (error) {
      if (
        (error as { code?: unknown }).code !== STREAM_NOT_FOUND &&
        errorName(error) !== "StreamNotFoundError"
      ) {
        throw setup("could not be read", error);
      }
    }
    if (!info) {
      try {
        return await jsm.streams.add({
          ...options.config,
          name: options.name,
          subjects: [...options.subjects],
          duplicate_window: window,
        });
      } catch (error) {
        // Another process created it meanwhile: read it again (once).
        if (attempt === 0) continue;
        throw setup("could not be created", error);
      }
    }
    const existing = info.config.subjects ?? [];
    const missing = options.subjects.filter((s) => !existing.includes(s));
    if (missing.length === 0 && info.config.duplicate_window >= window) return info;
    try {
      return await jsm.streams.update(options.name, {
        subjects: [...existing, ...missing],
        duplicate_window: Math.max(window, info.config.duplicate_window),
      });
    } catch (error) {
      throw setup("could not be updated", error);
    }
  }
}
