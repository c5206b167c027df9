import {
  DriverAdapterError,
  type SqlDriverAdapter,
  type SqlMigrationAwareDriverAdapterFactory,
} from "@prisma/driver-adapter-utils";

/**
 * Holds a database's client shut until the database is ready (answered, passed the start-up
 * checks, has its schema). While shut, every statement the client would send (a routed call, a
 * shard transaction, a relay poll, a raw query) fails as an unreachable database does: Prisma's
 * P1001, which `isShardUnavailable` recognises, so the shard's requests answer 503 naming it while
 * the rest of the service works. A gate only ever opens.
 */
export class DatabaseGate {
  private shut = true;

  constructor(
    /** How the refusal names the database (a password-less URL). */
    readonly name: string,
  ) {}

  get isOpen(): boolean {
    return !this.shut;
  }

  open(): void {
    this.shut = false;
  }

  /** `factory` with every statement of its connections checked against the gate first. */
  wrap(factory: SqlMigrationAwareDriverAdapterFactory): SqlMigrationAwareDriverAdapterFactory {
    const gate = this;
    return {
      provider: factory.provider,
      adapterName: factory.adapterName,
      async connect() {
        return gate.guard(await factory.connect());
      },
      connectToShadowDb: () => factory.connectToShadowDb(),
    };
  }

  /** `adapter` with every statement checked against the gate first. */
  guard(adapter: SqlDriverAdapter): SqlDriverAdapter {
    const guarded: SqlDriverAdapter = {
      provider: adapter.provider,
      adapterName: adapter.adapterName,
      queryRaw: (query) => (this.shut ? this.refuse() : adapter.queryRaw(query)),
      executeRaw: (query) => (this.shut ? this.refuse() : adapter.executeRaw(query)),
      executeScript: (script) => (this.shut ? this.refuse() : adapter.executeScript(script)),
      startTransaction: (level) => (this.shut ? this.refuse() : adapter.startTransaction(level)),
      dispose: () => adapter.dispose(),
    };
    const info = adapter.getConnectionInfo;
    if (info) guarded.getConnectionInfo = () => info.call(adapter);
    return guarded;
  }

  private refuse(): Promise<never> {
    const host = `${this.name} (not ready: waiting for it to answer and get its schema)`;
    // Prisma's engine words the refusal from `kind` and `host` (P1001); `message` is what the error
    // says where no engine is between (the partition map's statements: `pooledRaw`).
    const payload = { kind: "DatabaseNotReachable", host, message: `Can't reach database server at ${host}` };
    return Promise.reject(
      new DriverAdapterError(payload as ConstructorParameters<typeof DriverAdapterError>[0]),
    );
  }
}
