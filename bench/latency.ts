// Latency samples: sequential calls, as cluster-autoscaler makes them, one after another from its loop.
import { round } from "./machine-info.ts";

export interface LatencySummary {
  readonly n: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Calls that answered with a gRPC error; any is a broken run, not a slow one. */
  readonly errors: number;
}

/** One call; resolves with the gRPC error, if any (never rejects, like the test client). */
export type Probe = () => Promise<{ readonly error?: unknown }>;

/** Nearest-rank percentile of ascending `sorted`. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? Number.NaN;
}

export function summarise(samplesMs: readonly number[], errors: number): LatencySummary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  return {
    n: sorted.length,
    p50Ms: round(percentile(sorted, 50), 3),
    p99Ms: round(percentile(sorted, 99), 3),
    maxMs: round(sorted.at(-1) ?? Number.NaN, 3),
    errors,
  };
}

/** `warmup` untimed calls, then `count` timed ones, one at a time. */
export async function sequential(probe: Probe, count: number, warmup: number): Promise<LatencySummary> {
  for (let i = 0; i < warmup; i++) await probe();
  const samples: number[] = [];
  let errors = 0;
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const { error } = await probe();
    samples.push(performance.now() - started);
    if (error !== undefined) errors += 1;
  }
  return summarise(samples, errors);
}
