// The printed report: one table per concern, then the project's goals as met or missed.
import { BENCHED, type BenchedMethod } from "./baseline.ts";
import { PLUG_TIMEOUT_MS } from "./layout.ts";
import type { ConditionResult, SizeResult } from "./scenario.ts";

export interface Goal {
  readonly goal: string;
  readonly measured: string;
  readonly met: boolean;
}

const MB = 1024 * 1024;
const RSS_GOAL_MB = 150;
const RPC_P99_RATIO_GOAL = 3;
const REFRESH_CPU_RATIO_GOAL = 2;
const REFRESH_CPU_KY_RATIO_GOAL = 1.5;
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
const mb1 = (bytes: number): string => (bytes / MB).toFixed(1);
const kb = (bytes: number): string => (bytes / 1024).toFixed(1);
const refreshCpuRatio = (c: ConditionResult): number => c.refreshCpuMs.mean / c.floor.cpuMs.mean;
const refreshCpuKyRatio = (c: ConditionResult): number => c.refreshCpuMs.mean / c.kyFloor.cpuMs.mean;

function rpcRatio(c: ConditionResult, m: BenchedMethod): number {
  return c.rpc[m].latency.p99Ms / c.baseline[m].latency.p99Ms;
}

/** The machines, and the Nodes that match none when there are any. */
function sizeText(r: SizeResult): string {
  const { count, bytesEach } = r.foreignNodes;
  return count === 0 ? String(r.site.machines) : `${r.site.machines} + ${count} other Nodes of ${(bytesEach / 1024).toFixed(1)} KB`;
}

export function formatResults(results: readonly SizeResult[]): string {
  const each = results.flatMap((r) => r.conditions.map((c) => ({ r, c })));
  const overview = table(
    ["machines", "memory", "spawn→RPC ms", "RSS start", "RSS plateau median / max (anon)", "peak RSS", "cgroup peak", "CPU ms/loop", "RPCs/loop", "apiserver req/loop", "Lease req/loop"],
    each.map(({ r, c }) => [
      sizeText(r),
      c.label,
      String(c.startup.firstRpcMs),
      mb(c.rssAtStartBytes),
      `${mb(c.rssPlateau.medianBytes)} / ${mb(c.rssPlateau.maxBytes)} (${mb(c.rssPlateau.anonMaxBytes)}; n=${c.rssPlateau.samples})`,
      mb(c.peakRssBytes),
      c.cgroup === undefined ? "-" : `${mb(c.cgroup.peakBytes)}${c.cgroup.oomKills > 0 ? ` (${c.cgroup.oomKills} OOM kills)` : ""}`,
      String(c.cpuMsPerLoop),
      String(c.rpcsPerLoop),
      `${String(c.apiserver.perLoop)} (${c.apiserver.loops} loops)`,
      String(c.apiserver.leasePerLoop),
    ]),
  );
  const memory = table(
    ["machines", "memory", "RSS anon", "V8 heap reserved", "of it used", "of it young gen", "external", "anon outside both"],
    each.map(({ r, c }) => {
      const { anonBytes, heap } = c.memoryAtEnd;
      return [
        sizeText(r),
        c.label,
        mb(anonBytes),
        mb(heap.totalBytes),
        mb(heap.usedBytes),
        mb(heap.youngBytes),
        mb(heap.externalBytes),
        mb(anonBytes - heap.totalBytes - heap.externalBytes),
      ];
    }),
  );
  const refresh = table(
    ["machines", "memory", "Refresh p50 / p99 ms", "Refresh CPU ms mean / max", "of it main thread", "GC pause ms young / old", "full GCs: in n Refreshes, CPU with / without", "floor CPU ms", "ratio", "floor p50 / p99 ms", "ky floor CPU ms", "ratio", "ky floor p50 / p99 ms", "garbage/Refresh MB", "garbage/loop rest MB", "to old gen MB: Refresh / rest"],
    each.map(({ r, c }) => [
      String(r.site.machines),
      c.label,
      `${ms(c.refresh.p50Ms)} / ${ms(c.refresh.p99Ms)}`,
      `${ms(c.refreshCpuMs.mean)} / ${ms(c.refreshCpuMs.max)}`,
      ms(c.refreshMainThreadCpuMs.mean),
      `${ms(c.refreshGcMs.young.mean)} / ${ms(c.refreshGcMs.old.mean)}`,
      `${c.refreshFullGc.refreshes}, ${c.refreshFullGc.withCpuMs === undefined ? "-" : ms(c.refreshFullGc.withCpuMs.mean)} / ${c.refreshFullGc.withoutCpuMs === undefined ? "-" : ms(c.refreshFullGc.withoutCpuMs.mean)}`,
      ms(c.floor.cpuMs.mean),
      refreshCpuRatio(c).toFixed(2),
      `${ms(c.floor.refresh.p50Ms)} / ${ms(c.floor.refresh.p99Ms)}`,
      ms(c.kyFloor.cpuMs.mean),
      refreshCpuKyRatio(c).toFixed(2),
      `${ms(c.kyFloor.refresh.p50Ms)} / ${ms(c.kyFloor.refresh.p99Ms)}`,
      mb1(c.refreshGarbageBytes.mean),
      mb1(c.loopRpcGarbageBytes.mean),
      `${mb1(c.promotedBytes.refresh.mean)} / ${mb1(c.promotedBytes.rest.mean)}`,
    ]),
  );
  const rpc = table(
    ["machines memory RPC", "plugpool p50 / p99 ms", "baseline p50 / p99 ms", "p99 ratio", "plugpool alone: p50 / p99 ms", "garbage KB/call (baseline)", "GC pause ms young / old (baseline)", "baseline, image's env: p50 / p99 ms", "its GC pause ms young / old"],
    each.flatMap(({ r, c }) =>
      BENCHED.map((m) => [
        `${r.site.machines} ${c.label} ${RPC_NAMES[m]}`,
        `${ms(c.rpc[m].latency.p50Ms)} / ${ms(c.rpc[m].latency.p99Ms)}`,
        `${ms(c.baseline[m].latency.p50Ms)} / ${ms(c.baseline[m].latency.p99Ms)}`,
        rpcRatio(c, m).toFixed(2),
        `${ms(c.alone[m].p50Ms)} / ${ms(c.alone[m].p99Ms)}`,
        `${kb(c.rpc[m].garbageBytesPerCall)} (${kb(c.baseline[m].garbageBytesPerCall)})`,
        `${ms(c.rpc[m].gcMs.young)} / ${ms(c.rpc[m].gcMs.old)} (${ms(c.baseline[m].gcMs.young)} / ${ms(c.baseline[m].gcMs.old)})`,
        `${ms(c.baselineImageEnv[m].latency.p50Ms)} / ${ms(c.baselineImageEnv[m].latency.p99Ms)}`,
        `${ms(c.baselineImageEnv[m].gcMs.young)} / ${ms(c.baselineImageEnv[m].gcMs.old)}`,
      ]),
    ),
  );
  const cgroups = each.flatMap(({ c }) => (c.cgroup === undefined ? [] : [`${c.label}: ${c.cgroup.where}`]));
  const profiles = each.flatMap(({ c }) => (c.cpuProfileDir === undefined ? [] : [`${c.label}: ${c.cpuProfileDir}`]));
  const load = results.map((r) => `${r.site.machines}: ${r.loadAverage.start.join(" ")} → ${r.loadAverage.end.join(" ")}`);
  return [
    "plugpool (own process, compiled) at CA's cadence — memory, CPU per CA loop (idle gaps included), kube-apiserver requests",
    overview,
    "",
    "What the anonymous RSS is made of at the end of the loops (the rest: Node.js and V8 themselves, sockets, malloc)",
    memory,
    "",
    "Refresh — plugpool against two floors (a plain node:http keep-alive client; ky over plugpool's undici Agent), same plugs, same cadence, each in its own process",
    refresh,
    "",
    "RPC latency over h2c gRPC (grpc-js client), one call at a time, plugpool and two baselines taking turns call by call (then plugpool alone, its calls back to back); baseline = bare Connect server answering the same bytes (with Node.js defaults; then with the image's environment, its heap flags, for comparison)",
    rpc,
    "",
    ...(cgroups.length > 0 ? [`cgroups: ${cgroups.join("; ")}`] : []),
    ...(profiles.length > 0 ? [`CPU profiles (open in Chrome DevTools or VS Code): ${profiles.join("; ")}`] : []),
    `load average (1 5 15 min) per size: ${load.join("; ")}`,
  ].join("\n");
}

/** The project's goals, judged at the largest size measured, in every condition (apiserver: at every size). */
export function goals(results: readonly SizeResult[]): Goal[] {
  const largest = results.at(-1);
  if (largest === undefined) return [];
  const at = `at ${largest.site.machines} machines`;
  const refreshLimit = PLUG_TIMEOUT_MS + 100;
  return largest.conditions.flatMap((c) => {
    const worst = BENCHED.map((m) => ({ m, ratio: rpcRatio(c, m) })).sort((a, b) => b.ratio - a.ratio)[0];
    const ratio = refreshCpuRatio(c);
    const kyRatio = refreshCpuKyRatio(c);
    return [
      {
        goal: `[${c.label}] RSS ≤ ${RSS_GOAL_MB} MB steady ${at} (plateau max)`,
        measured: `${mb(c.rssPlateau.maxBytes)} MB (median ${mb(c.rssPlateau.medianBytes)}; anonymous ${mb(c.rssPlateau.anonMaxBytes)}, the rest the node binary's pages)`,
        met: c.rssPlateau.maxBytes / MB <= RSS_GOAL_MB,
      },
      {
        goal: `[${c.label}] RPC p99 ≤ ${RPC_P99_RATIO_GOAL}× the bare Connect server ${at}`,
        measured: worst ? `worst ${RPC_NAMES[worst.m]} ${worst.ratio.toFixed(2)}×` : "n/a",
        met: worst !== undefined && worst.ratio <= RPC_P99_RATIO_GOAL,
      },
      {
        goal: `[${c.label}] Refresh p99 ≤ plug timeout + 100 ms (${refreshLimit} ms) ${at}`,
        measured: `${ms(c.refresh.p99Ms)} ms (p50 ${ms(c.refresh.p50Ms)}, n=${c.refresh.n})`,
        met: c.refresh.p99Ms <= refreshLimit,
      },
      {
        goal: `[${c.label}] 0 kube-apiserver requests per CA loop once synced, besides the Leases'`,
        measured: results.map((r) => `${r.site.machines}: ${String(r.conditions.find((o) => o.label === c.label)?.apiserver.perLoop)}`).join(", "),
        met: results.every((r) => r.conditions.every((o) => o.label !== c.label || o.apiserver.perLoop === 0)),
      },
      {
        goal: `[${c.label}] Refresh CPU ≤ ${REFRESH_CPU_RATIO_GOAL}× the node:http keep-alive floor ${at}`,
        measured: `${ratio.toFixed(2)}× (${ms(c.refreshCpuMs.mean)} vs ${ms(c.floor.cpuMs.mean)} ms)`,
        met: ratio <= REFRESH_CPU_RATIO_GOAL,
      },
      {
        goal: `[${c.label}] Refresh CPU ≤ ${REFRESH_CPU_KY_RATIO_GOAL}× the floor of ky over the same undici Agent ${at}`,
        measured: `${kyRatio.toFixed(2)}× (${ms(c.refreshCpuMs.mean)} vs ${ms(c.kyFloor.cpuMs.mean)} ms)`,
        met: kyRatio <= REFRESH_CPU_KY_RATIO_GOAL,
      },
    ];
  });
}

export function formatGoals(list: readonly Goal[]): string {
  return ["goals", ...list.map((g) => `  ${g.met ? "met   " : "MISSED"}  ${g.goal}: ${g.measured}`)].join("\n");
}
