// Latency samples: calls one at a time, as cluster-autoscaler makes them from its loop.
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

/**
 * `warmup` untimed rounds, then `count` timed ones; a round calls every probe once, one call at a time, each
 * round starting with the next probe. Servers measured call by call side by side meet the same moments of a
 * shared machine: measured one after another, a bare server's p50 moved 0.7–4.0 ms between runs and phases of
 * one run, and its p99 with it, which made a ratio of tails measured minutes apart a ratio of moments.
 */
export async function interleaved(probes: readonly Probe[], count: number, warmup: number): Promise<LatencySummary[]> {
  const samples = probes.map((): number[] => []);
  const errors = probes.map(() => 0);
  for (let round = 0; round < warmup + count; round++) {
    for (let k = 0; k < probes.length; k++) {
      const i = (round + k) % probes.length;
      const probe = probes[i];
      if (probe === undefined) continue;
      const started = performance.now();
      const { error } = await probe();
      const ms = performance.now() - started;
      if (round < warmup) continue;
      samples[i]?.push(ms);
      if (error !== undefined) errors[i] = (errors[i] ?? 0) + 1;
    }
  }
  return samples.map((s, i) => summarise(s, errors[i] ?? 0));
}
