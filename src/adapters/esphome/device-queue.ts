// At most one request in flight per ESPHome device: the IDF httpd serves one request at a time and the
// ESP8266 stack has crashed under parallel requests (esphome/issues#5676). Devices are
// independent of each other, so only requests to the same key wait.

export interface DeviceQueue {
  /**
   * Runs `task` once every earlier task for `device` has finished (FIFO). Waiting ends early, and the
   * task never runs, when `signal` aborts; the promise then rejects with the signal's reason.
   */
  run<T>(device: string, signal: AbortSignal, task: () => Promise<T>): Promise<T>;
}

export function createDeviceQueue(): DeviceQueue {
  // A key is present while a task of that device runs; its array holds the waiters' wake-up calls.
  const waiting = new Map<string, (() => void)[]>();

  function acquire(device: string, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    const queue = waiting.get(device);
    if (!queue) {
      waiting.set(device, []);
      return Promise.resolve();
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

  return {
    async run(device, signal, task) {
      await acquire(device, signal);
      try {
        return await task();
      } finally {
        release(device);
      }
    },
  };
}
