// Durations as Go's time.ParseDuration (and so Kubernetes) writes them: "90s", "5m", "1h30m", "500ms", "1.5h".
// Unlike Go, a sign is refused: no setting of plugpool takes a negative duration.

const NS_PER_UNIT: Readonly<Record<string, bigint>> = {
  ns: 1n,
  us: 1_000n,
  "\u00B5s": 1_000n, // micro sign, as Go accepts
  "\u03BCs": 1_000n, // Greek mu, as Go accepts
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

// The micro signs escaped: one character outside ASCII anywhere in the bundle makes Node hold its whole source
// (4 MB) as UTF-16, twice the memory.
const WHOLE = /^(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|\u00B5s|\u03BCs|ms|s|m|h))+$/u;
const PART = /(\d*)(?:\.(\d*))?(ns|us|\u00B5s|\u03BCs|ms|s|m|h)/gu;

/** Go's limit: a duration is an int64 count of nanoseconds. */
const MAX_NS = 2n ** 63n - 1n;

/**
 * Parses a Go-style duration into milliseconds (fractional below 1 ms). Returns undefined for anything Go
 * would refuse, for a bare number other than "0" (a unit is required), and for a sign.
 */
export function parseDuration(text: string): number | undefined {
  if (text === "0") return 0;
  if (!WHOLE.test(text)) return undefined;
  let ns = 0n;
  for (const [, whole = "", fraction = "", unit = ""] of text.matchAll(PART)) {
    const scale = NS_PER_UNIT[unit] ?? 0n;
    // Exact arithmetic, as Go does: "1.1s" is 1100 ms, not 1100.0000000000002.
    const digits = BigInt((whole || "0") + fraction);
    ns += (digits * scale) / 10n ** BigInt(fraction.length);
    if (ns > MAX_NS) return undefined;
  }
  return Number(ns) / 1e6;
}
