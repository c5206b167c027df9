// Promises that start only when awaited, as Prisma's own do.
/**
 * A promise that starts `start` only when it is awaited (then-ed), as Prisma's own promises do: a
 * call that is made but never awaited runs nothing and leaves no unhandled rejection.
 */
export function lazy<T>(start: () => Promise<T>): Promise<T> {
  let promise: Promise<T> | undefined;
  const get = () => {
    promise ??= start();
    return promise;
  };
  return {
    // biome-ignore lint/suspicious/noThenProperty: a lazy promise, as Prisma's are
    then: (onFulfilled, onRejected) => get().then(onFulfilled, onRejected),
    catch: (onRejected) => get().catch(onRejected),
    finally: (onFinally) => get().finally(onFinally),
    [Symbol.toStringTag]: "PrismaPromise",
  } as Promise<T>;
}

/** A refusal that rejects only when awaited. */
export function lazyReject(error: unknown): Promise<never> {
  return lazy(() => Promise.reject(error));
}
