// Waiting without timers: a promise-chain lock, and a way to stop waiting when a call's signal aborts.
import { PlugpoolError } from "./errors.ts";

/**
 * Resolves or rejects as `promise` does, or rejects as soon as `signal` aborts. The promise itself runs on
 * (its own handlers still see its outcome); only this wait ends.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(cancelled(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      reject(cancelled(signal));
    };
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => {
      signal.removeEventListener("abort", onAbort);
    });
  });
}

/** The error of a call whose signal aborted; the signal's reason (a deadline, a cancel) is its cause. */
export function cancelled(signal: AbortSignal): PlugpoolError {
  return new PlugpoolError("cancelled", "the call was cancelled, or its deadline passed, before it finished", { cause: signal.reason });
}

/** Throws `cancelled` once the call's signal has aborted. */
export function throwIfCancelled(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw cancelled(signal);
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
