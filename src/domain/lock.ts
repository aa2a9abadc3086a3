// Waiting without timers: a promise-chain lock, and a way to stop waiting when a call's signal aborts.
import { PlugpoolError } from "./errors.ts";

/**
 * Resolves or rejects as `promise` does, or rejects as soon as `signal` aborts. The promise itself runs on
 * (its own handlers still see its outcome); only this wait ends.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(cancelled());
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      reject(cancelled());
    };
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => {
      signal.removeEventListener("abort", onAbort);
    });
  });
}

function cancelled(): PlugpoolError {
  return new PlugpoolError("internal", "the call was cancelled before it finished");
}

/** Runs functions one at a time, in call order. */
export type Lock = <T>(fn: () => Promise<T>, signal?: AbortSignal) => Promise<T>;

/**
 * A lock over a promise chain. A caller whose signal aborts while it waits gives up its turn without
 * breaking the chain: later callers still wait for the earlier holders.
 */
export function createLock(): Lock {
  let tail: Promise<void> = Promise.resolve();
  return async <T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> => {
    const before = tail;
    let release = (): void => undefined;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    tail = before.then(() => mine);
    try {
      await untilAborted(before, signal);
      return await fn();
    } finally {
      release();
    }
  };
}
