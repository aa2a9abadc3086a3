// One task at a time per device, first come first served: every backend serialises the calls to one device
// (each says why its devices need it). Devices are independent of each other, so only tasks of the same key wait.
import { started } from "./started.ts";

/** Serialises tasks per device key. */
export interface DeviceQueue {
  /**
   * Runs `task` once every earlier task for `device` has finished (FIFO). Waiting ends early, and the
   * task never runs, when `signal` aborts; the promise then rejects with the signal's reason.
   */
  run<T>(device: string, signal: AbortSignal, task: () => Promise<T>): Promise<T>;
}

/** An empty queue: a key's first task runs at once. */
export function createDeviceQueue(): DeviceQueue {
  // A key is present while a task of that device runs; its array holds the waiters' wake-up calls.
  const waiting = new Map<string, (() => void)[]>();

  /** Takes the device's turn now (undefined) or once every earlier task has finished (the promise). */
  function acquire(device: string, signal: AbortSignal): Promise<void> | undefined {
    const queue = waiting.get(device);
    if (!queue) {
      waiting.set(device, []);
      return undefined;
    }
    return new Promise<void>((resolve, reject) => {
      const wake = (): void => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = (): void => {
        queue.splice(queue.indexOf(wake), 1);
        reject(signal.reason as Error);
      };
      queue.push(wake);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  function release(device: string): void {
    const next = waiting.get(device)?.shift();
    if (next) next();
    else waiting.delete(device);
  }

  // Chained, not awaited (see started.ts).
  function runHeld<T>(device: string, task: () => Promise<T>): Promise<T> {
    return started(task).then(
      (value) => {
        release(device);
        return value;
      },
      (error: unknown) => {
        release(device);
        throw error;
      },
    );
  }

  return {
    // No await when the device is free, as it is for nearly every call: a Refresh asks every device at once.
    run(device, signal, task) {
      if (signal.aborted) return Promise.reject(signal.reason as Error);
      const turn = acquire(device, signal);
      return turn === undefined ? runHeld(device, task) : turn.then(() => runHeld(device, task));
    },
  };
}
