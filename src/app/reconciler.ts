import type { Clock, Pool } from "../domain/index.ts";
import type { Logger } from "./logger.ts";
import { messageOf } from "../domain/errors.ts";

/** Even when nothing wakes it, the loop looks again this often (a recorded power-off it has not seen yet). */
const IDLE_LOOK_MS = 30_000;
const AFTER_ERROR_MS = 5_000;

/**
 * A pass running for longer than this is taken to be stuck, and /healthz fails so that the kubelet restarts
 * plugpool; the restarted process resumes every power-off from what the cluster shows. A pass only does
 * steps that are each bounded by an adapter's timeout (seconds) and never waits out a grace period (it
 * returns the wait instead), so a sound pass ends far sooner.
 */
export const STALLED_PASS_MS = 5 * 60_000;

export interface Reconciler {
  /** Run as soon as possible (a DeleteNodes, a node or pod event). */
  wake(): void;
  /** Stops scheduling and waits for the run in progress: its state is on the cluster, a restart resumes it. */
  stop(): Promise<void>;
  /** When the last pass ended (clock ms), whether it succeeded or failed; undefined before the first. */
  lastProgress(): number | undefined;
  /** How long the pass in progress has been running at `now` (ms); 0 between passes. */
  stalledFor(now: number): number;
}

/**
 * Owns the timers of the pool's reconciliation (power-offs in progress, queued power-ons, power restores): the
 * domain says how long to wait, this loop waits. Runs never overlap; a wake during a run causes one more run
 * right after it.
 */
export function startReconciler(pool: Pool, logger: Logger, clock: Pick<Clock, "now"> = { now: () => Date.now() }): Reconciler {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const state = { again: false, stopped: false };
  const progress: { passStartedAt?: number; lastEnded?: number } = {};

  const schedule = (ms: number) => {
    clearTimeout(timer);
    if (!state.stopped) timer = setTimeout(wake, ms);
  };

  async function run(): Promise<void> {
    progress.passStartedAt = clock.now();
    try {
      const wait = await pool.reconcile();
      schedule(Math.min(wait ?? IDLE_LOOK_MS, IDLE_LOOK_MS));
    } catch (e) {
      logger.error("power-off run failed", { error: messageOf(e) });
      schedule(AFTER_ERROR_MS);
    } finally {
      progress.lastEnded = clock.now();
      delete progress.passStartedAt;
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
    lastProgress: () => progress.lastEnded,
    stalledFor: (now) => (progress.passStartedAt === undefined ? 0 : Math.max(0, now - progress.passStartedAt)),
  };
}

/**
 * The loop's liveness problems at `now`, for /healthz: one when its pass has been running for longer than
 * `boundMs`, else none.
 */
export function reconcilerLiveness(loop: Reconciler, now: number, boundMs = STALLED_PASS_MS): string[] {
  const stalled = loop.stalledFor(now);
  if (stalled <= boundMs) return [];
  const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;
  return [`power-off pass running for ${seconds(stalled)} (more than ${seconds(boundMs)})`];
}
