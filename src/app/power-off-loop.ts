import type { Pool } from "../domain/index.ts";
import type { Logger } from "./logger.ts";

/** Even when nothing wakes it, the loop looks again this often (a recorded power-off it has not seen yet). */
const IDLE_LOOK_MS = 30_000;
const AFTER_ERROR_MS = 5_000;

export interface PowerOffLoop {
  /** Run as soon as possible (a DeleteNodes, a node or pod event). */
  wake(): void;
  /** Stops scheduling and waits for the run in progress: its state is on the cluster, a restart resumes it. */
  stop(): Promise<void>;
}

/**
 * Owns the timers of the power-off saga: the domain says how long to wait, this loop waits. Runs never
 * overlap; a wake during a run causes one more run right after it.
 */
export function startPowerOffLoop(pool: Pool, logger: Logger): PowerOffLoop {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const state = { again: false, stopped: false };

  const schedule = (ms: number) => {
    clearTimeout(timer);
    if (!state.stopped) timer = setTimeout(wake, ms);
  };

  async function run(): Promise<void> {
    try {
      const wait = await pool.runPowerOffs();
      schedule(Math.min(wait ?? IDLE_LOOK_MS, IDLE_LOOK_MS));
    } catch (e) {
      logger.error("power-off run failed", { error: e instanceof Error ? e.message : String(e) });
      schedule(AFTER_ERROR_MS);
    }
  }

  function wake(): void {
    if (state.stopped) return;
    if (running) {
      state.again = true;
      return;
    }
    state.again = false;
    running = run().finally(() => {
      running = undefined;
      if (state.again) wake();
    });
  }

  wake();
  return {
    wake,
    async stop() {
      // In-flight steps are left to finish (each is bounded by its adapter's timeout), not aborted.
      state.stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
