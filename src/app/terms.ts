// The terms of a leader-elected plugpool: each time this process starts acting it builds a fresh pool (its
// records read anew, so it sees what another instance did meanwhile), and the moment it stops acting that pool
// turns passive and its runner and record writes stop. cluster-autoscaler talks to whichever term acts now.
import type { Leadership, Pool } from "../domain/index.ts";
import { notActing, poolThrough } from "../domain/index.ts";
import type { LeaderLease } from "../adapters/kubernetes/leader-lease.ts";
import type { Logger } from "./logger.ts";
import type { Reconciler } from "./reconciler.ts";
import { messageOf } from "../domain/errors.ts";

/** What a term runs: its pool and runner, and how it ends (`flush`: let the record writes under way land first). */
export interface Term {
  readonly pool: Pool;
  readonly runner: Reconciler;
  stop(flush: boolean): Promise<void>;
}

export interface Terms {
  /** Call on every change of the lease's acting (its onChange). */
  changed(): void;
  /** Resolves once the changes told so far are applied (a term they started is built). */
  settled(): Promise<void>;
  /** The acting term; undefined while this process does not act. */
  current(): Term | undefined;
  /** Ends the term under way, letting its record writes land; builds none after. */
  stop(): Promise<void>;
}

/** A term's own view of the leadership: once the term ends it never acts again, even if a later term starts. */
function termLeadership(lease: LeaderLease, term: number): Leadership {
  return { acting: () => lease.acting() && lease.term() === term, holder: () => lease.holder() };
}

/** After a term failed to start (its records could not be read), it is tried again this much later while it lasts. */
export const TERM_RETRY_MS = 2_000;

export function followTerms(lease: LeaderLease, build: (leadership: Leadership) => Promise<Term>, logger: Logger, retryMs = TERM_RETRY_MS): Terms {
  let running: { readonly number: number; readonly term: Term; readonly leadership: Leadership } | undefined;
  let queue = Promise.resolve();
  let retry: NodeJS.Timeout | undefined;
  let stopped = false;
  // A function: the flag may change while apply() waits.
  const isStopped = (): boolean => stopped;

  async function end(flush: boolean): Promise<void> {
    const last = running;
    running = undefined;
    if (last === undefined) return;
    if (!flush) logger.warn("stopped acting: this plugpool no longer holds its Lease", { holder: lease.holder() ?? "none" });
    await last.term.stop(flush);
  }

  async function apply(): Promise<void> {
    if (running !== undefined && !running.leadership.acting()) await end(false);
    if (isStopped() || running !== undefined || !lease.acting()) return;
    const number = lease.term();
    const leadership = termLeadership(lease, number);
    const term = await build(leadership);
    // The term may have ended while its records were read.
    if (isStopped() || !leadership.acting()) {
      await term.stop(false);
      return;
    }
    running = { number, term, leadership };
    logger.info("acting: this plugpool holds its Lease", { term: number });
  }

  // A process that holds the Lease without a pool would keep the other instance from acting: try again.
  function changed(): void {
    clearTimeout(retry);
    queue = queue.then(apply).catch((e: unknown) => {
      logger.error("starting or ending a term failed; trying again", { error: messageOf(e) });
      if (!isStopped()) retry = setTimeout(changed, retryMs);
    });
  }

  return {
    changed,
    settled: () => queue,
    current: () => (running?.leadership.acting() === true ? running.term : undefined),
    async stop() {
      stopped = true;
      clearTimeout(retry);
      await queue;
      await end(true);
    },
  };
}

/**
 * The pool cluster-autoscaler talks to: the acting term's. While none acts, its calls answer `not-leader` naming
 * the acting instance, the runner's pass does nothing, and the reports (quarantine, usage) are empty.
 */
export function currentPool(current: () => Pool | undefined, leadership: Leadership): Pool {
  const forCa = (what: string): Pool => {
    const acting = current();
    if (acting === undefined) throw notActing(leadership, what);
    return acting;
  };
  return poolThrough(forCa, current, current);
}
