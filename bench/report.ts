// The printed report: one table per concern, then the goals (issue 9) as met or missed.
import { BENCHED, type BenchedMethod } from "./baseline.ts";
import { PLUG_TIMEOUT_MS } from "./layout.ts";
import { round } from "./machine-info.ts";
import type { SizeResult } from "./scenario.ts";

export interface Goal {
  readonly goal: string;
  readonly measured: string;
  readonly met: boolean;
}

const MB = 1024 * 1024;
const RPC_NAMES: Readonly<Record<BenchedMethod, string>> = {
  nodeGroupNodes: "NodeGroupNodes",
  nodeGroupForNode: "NodeGroupForNode",
  nodeGroupTargetSize: "NodeGroupTargetSize",
  nodeGroupTemplateNodeInfo: "NodeGroupTemplateNodeInfo",
};

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

const ms = (v: number): string => (v >= 100 ? v.toFixed(0) : v.toFixed(2));
const mb = (bytes: number): string => (bytes / MB).toFixed(0);

export function formatResults(results: readonly SizeResult[]): string {
  const overview = table(
    ["machines", "groups", "reg/dead/slow", "spawn→RPC ms", "(synced)", "Refresh p50/p99 ms", "RSS start→after MB", "peak RSS", "heap used start→after", "baseline RSS", "apiserver req at start", "req/loop", "watch starts", "CPU ms/loop"],
    results.map((r) => [
      String(r.site.machines),
      String(r.site.groups),
      `${r.site.registered}/${r.site.dead}/${r.site.slow}`,
      String(r.startup.firstRpcMs),
      String(r.startup.syncedMs),
      `${ms(r.refresh.p50Ms)} / ${ms(r.refresh.p99Ms)}`,
      `${mb(r.memoryAtStart.rssBytes)} → ${mb(r.memory.rssBytes)}`,
      mb(r.memory.peakRssBytes),
      `${mb(r.memoryAtStart.heapUsedBytes)} → ${mb(r.memory.heapUsedBytes)}`,
      mb(r.baselineMemory.rssBytes),
      `${r.apiserver.atStartup.reads} reads, ${r.apiserver.atStartup.watchStarts} watches`,
      `${String(r.apiserver.perLoop)} (${r.apiserver.loops} loops, ${r.apiserver.rpcsPerLoop} RPCs each)`,
      `${r.apiserver.watchStarts} in ${r.apiserver.windowS} s`,
      String(r.cpuMsPerLoop),
    ]),
  );
  const rpcRows = results.flatMap((r) =>
    BENCHED.map((m) => {
      const { plugpool: p, baseline: b } = r.rpc[m];
      return [
        `${r.site.machines} ${RPC_NAMES[m]}`,
        `${ms(p.sequential.p50Ms)} / ${ms(p.sequential.p99Ms)}`,
        `${ms(b.sequential.p50Ms)} / ${ms(b.sequential.p99Ms)}`,
        `${(p.sequential.p50Ms / b.sequential.p50Ms).toFixed(2)} / ${(p.sequential.p99Ms / b.sequential.p99Ms).toFixed(2)}`,
        String(p.concurrent.callsPerSecond),
        String(b.concurrent.callsPerSecond),
        `${ms(p.concurrent.p99Ms)} / ${ms(b.concurrent.p99Ms)}`,
        String(p.sequential.errors + p.concurrent.errors + b.sequential.errors + b.concurrent.errors),
      ];
    }),
  );
  const rpc = table(
    ["machines RPC", "plugpool p50/p99 ms", "baseline p50/p99 ms", "ratio p50/p99", "plugpool calls/s", "baseline calls/s", "p99 at 16 callers (pp / base)", "errors"],
    rpcRows,
  );
  const load = results.map((r) => `${r.site.machines}: ${r.loadAverage.start.join(" ")} → rpc ${r.loadAverage.rpc.join(" ")} → end ${r.loadAverage.end.join(" ")}`);
  return [
    "plugpool (own process) — start-up, Refresh, memory after warm-up, kube-apiserver requests per CA loop",
    overview,
    "",
    `RPC latency over h2c gRPC (grpc-js client), sequential; throughput with ${results[0]?.rpc.nodeGroupNodes.plugpool.concurrent.callers ?? 16} concurrent callers; baseline = minimal Connect server answering the same bytes`,
    rpc,
    "",
    `load average (1 5 15 min) per size: ${load.join("; ")}`,
  ].join("\n");
}

/** Goals of issue 9, judged at the largest size measured (and the apiserver one at every size). */
export function goals(results: readonly SizeResult[]): Goal[] {
  const largest = results.at(-1);
  if (largest === undefined) return [];
  const at = `at ${largest.site.machines} machines`;
  const refreshLimit = PLUG_TIMEOUT_MS + 100;
  const worstRpc = BENCHED.map((m) => ({ m, p99: largest.rpc[m].plugpool.sequential.p99Ms })).sort((a, b) => b.p99 - a.p99)[0];
  const requests = results.map((r) => `${r.site.machines}: ${String(r.apiserver.perLoop)}`).join(", ");
  return [
    {
      goal: `Refresh p99 ≤ plug timeout + 100 ms (${refreshLimit} ms) ${at}`,
      measured: `${ms(largest.refresh.p99Ms)} ms (p50 ${ms(largest.refresh.p50Ms)}, n=${largest.refresh.n})`,
      met: largest.refresh.p99Ms <= refreshLimit,
    },
    {
      goal: `RPC p99 ≤ 5 ms ${at} (sequential, every benchmarked RPC)`,
      measured: worstRpc ? `worst ${RPC_NAMES[worstRpc.m]} ${ms(worstRpc.p99)} ms` : "n/a",
      met: worstRpc !== undefined && worstRpc.p99 <= 5,
    },
    {
      goal: "0 kube-apiserver requests per CA loop once synced (lists, reads, writes)",
      measured: requests,
      met: results.every((r) => r.apiserver.perLoop === 0),
    },
    {
      goal: `resident memory ≤ 150 MB ${at} after warm-up`,
      measured: `${mb(largest.memory.rssBytes)} MB (peak ${mb(largest.memory.peakRssBytes)} MB, heap used ${mb(largest.memory.heapUsedBytes)} MB)`,
      met: round(largest.memory.rssBytes / MB, 0) <= 150,
    },
  ];
}

export function formatGoals(list: readonly Goal[]): string {
  return ["goals", ...list.map((g) => `  ${g.met ? "met   " : "MISSED"}  ${g.goal}: ${g.measured}`)].join("\n");
}
