// Where plugpool's CPU time went (bench --cpu-prof), phase by phase: the V8 .cpuprofile its process writes on
// exit, its samples split at the times the bench began each phase. Both sides read the same clock: V8 stamps
// samples with CLOCK_MONOTONIC microseconds, as process.hrtime does in the bench. Idle samples are left out.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { SizeResult } from "./scenario.ts";

export interface ProfilePhase {
  readonly name: string;
  /** CLOCK_MONOTONIC, µs (monotonicUs()). */
  readonly startUs: number;
}

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

interface CpuProfile {
  readonly nodes: readonly { readonly id: number; readonly callFrame: CallFrame; readonly children?: readonly number[] }[];
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** A package under node_modules, one of plugpool's files, or a Node.js module (its bundled fetch is undici). */
function area(frame: CallFrame): string {
  if (frame.url === "") return frame.functionName.startsWith("(") ? frame.functionName : "(native / V8)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(frame.url);
  if (pkg?.[1] !== undefined) return pkg[1];
  const own = /\/((?:src|gen|tests)\/.*)$/.exec(frame.url);
  if (own?.[1] !== undefined) return own[1];
  if (frame.url === "node:internal/deps/undici/undici") return "node fetch (undici)";
  if (frame.url.startsWith("node:internal/modules/")) return "node module loading";
  if (frame.url.startsWith("wasm://")) return "wasm (type stripping)";
  return frame.url;
}

function functionName(frame: CallFrame): string {
  const place = frame.url === "" ? "" : ` ${frame.url.replace(/^.*\/(node_modules|src|gen)\//, "$1/")}:${frame.lineNumber + 1}`;
  return `${frame.functionName === "" ? "(anonymous)" : frame.functionName}${place}`;
}

class Tally {
  readonly counts = new Map<string, number>();
  add(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
  top(total: number, n: number): string[] {
    return [...this.counts.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, c]) => `      ${((100 * c) / total).toFixed(1).padStart(5)} %  ${name}`);
  }
}

interface PhaseTally {
  total: number;
  readonly self: Tally;
  readonly inclusive: Tally;
  readonly functions: Tally;
}

function tallyByPhase(profile: CpuProfile, phases: readonly ProfilePhase[]): PhaseTally[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  const tallies = phases.map(() => ({ total: 0, self: new Tally(), inclusive: new Tally(), functions: new Tally() }));
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    const frame = byId.get(id)?.callFrame;
    const index = phases.findLastIndex((p) => p.startUs <= at);
    const tally = tallies[index];
    if (frame === undefined || frame.functionName === "(idle)" || tally === undefined) return;
    tally.total += 1;
    tally.self.add(area(frame));
    tally.functions.add(functionName(frame));
    const onStack = new Set<string>();
    for (let node: number | undefined = id; node !== undefined; node = parent.get(node)) {
      const f = byId.get(node)?.callFrame;
      if (f !== undefined && f.url !== "") onStack.add(area(f));
    }
    for (const a of onStack) tally.inclusive.add(a);
  });
  return tallies;
}

export function summariseProfiles(results: readonly SizeResult[]): string {
  const out = ["plugpool CPU profiles, by phase (share of the phase's busy samples)"];
  for (const r of results) {
    if (r.cpuProfile === undefined) continue;
    const { dir, phases } = r.cpuProfile;
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))) {
      const profile = JSON.parse(readFileSync(join(dir, file), "utf8")) as CpuProfile;
      const intervalMs = (profile.timeDeltas.reduce((a, b) => a + b, 0) / Math.max(1, profile.samples.length)) / 1000;
      out.push(`${r.site.machines} machines: ${join(dir, file)}`);
      tallyByPhase(profile, phases).forEach((t, i) => {
        if (t.total === 0) return;
        out.push(
          `  ${phases[i]?.name ?? "?"}: ${t.total} busy samples (≈ ${Math.round(t.total * intervalMs)} ms CPU)`,
          "    by area, self time:", ...t.self.top(t.total, 8),
          "    by area, on the stack:", ...t.inclusive.top(t.total, 10),
          "    by function, self time:", ...t.functions.top(t.total, 8),
        );
      });
    }
  }
  return out.join("\n");
}
