// One size of the bench, start to finish: plugs, Nodes, plugpool in its own process, then the measurements
// in a fixed order (start-up, Refresh, CA loops with the apiserver requests they cause, RPC latency and
// throughput, memory), then the same RPCs against the transport baseline.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../src/app/config.ts";
import { createCloudProviderClient, type CloudProviderClient } from "../tests/support/grpc-client.ts";
import type { ControlPlane } from "../tests/support/control-plane.ts";
import { BENCHED, recordAnswers, startBaseline, type BenchedMethod, type RecordedAnswers } from "./baseline.ts";
import { deleteAllNodes, registerNodes } from "./cluster-fixture.ts";
import type { CountingProxy } from "./counting-proxy.ts";
import { startFleet } from "./fleet.ts";
import { concurrent, sequential, type LatencySummary, type ThroughputSummary } from "./latency.ts";
import { configYaml, layout, SLOW_PLUG_MS, summary, type Layout } from "./layout.ts";
import { load, round } from "./machine-info.ts";
import { monotonicUs, type ProfilePhase } from "./cpu-profile.ts";
import { procMemory, startPlugpool, type PlugpoolProcess, type ProcessSample, type StartupTimes } from "./plugpool-process.ts";
import { caLoop, probeFor, registeredNodes } from "./probes.ts";

export interface BenchSettings {
  readonly refreshSamples: number;
  readonly caLoops: number;
  readonly rpcSamples: number;
  readonly rpcWarmup: number;
  readonly callers: number;
  readonly throughputMs: number;
  /** Where configs, plugpool logs (and CPU profiles) go. */
  readonly workDir: string;
  /** plugpool's main module: src/app/main.ts, or main.js of a build. */
  readonly entry: string;
  readonly cpuProfile: boolean;
  /** Extra Node.js options for plugpool's process (experiments: heap limits, flags). */
  readonly nodeArgs: readonly string[];
}

export interface RpcResult {
  readonly sequential: LatencySummary;
  readonly concurrent: ThroughputSummary;
}

export interface ApiserverRequests {
  /** From spawn to the first answered RPC: the initial lists (reads) and watches (shows the proxy is in the path). */
  readonly atStartup: { readonly reads: number; readonly writes: number; readonly watchStarts: number };
  readonly loops: number;
  readonly rpcsPerLoop: number;
  readonly windowS: number;
  /** Lists and reads plus writes, per CA loop: the goal is 0. */
  readonly perLoop: number;
  readonly reads: number;
  readonly writes: number;
  /** Watch starts in the window (quiet watches renew about every 30 s, whatever CA does). */
  readonly watchStarts: number;
  /** The first requests seen, when there were any. */
  readonly seen: readonly string[];
}

export interface SizeResult {
  readonly site: ReturnType<typeof summary>;
  readonly startup: StartupTimes;
  readonly refresh: LatencySummary;
  readonly apiserver: ApiserverRequests;
  /** plugpool CPU time per CA loop (its own process). */
  readonly cpuMsPerLoop: number;
  /** Right after the first answered RPC. */
  readonly memoryAtStart: ProcessSample;
  /** After Refresh, the CA loops and the RPC load (the warm-up). */
  readonly memory: ProcessSample;
  /** The baseline server's, after the same RPC load. */
  readonly baselineMemory: { readonly rssBytes: number; readonly peakRssBytes: number };
  readonly rpc: Readonly<Record<BenchedMethod, { readonly plugpool: RpcResult; readonly baseline: RpcResult }>>;
  readonly loadAverage: { readonly start: readonly number[]; readonly rpc: readonly number[]; readonly end: readonly number[] };
  /** With --cpu-prof: where the profile is, and when each phase began (for a breakdown by phase). */
  readonly cpuProfile?: { readonly dir: string; readonly phases: readonly ProfilePhase[] };
}

type Say = (text: string) => void;

async function measureRpcs(client: CloudProviderClient, site: Layout, s: BenchSettings): Promise<Record<BenchedMethod, RpcResult>> {
  const out: Partial<Record<BenchedMethod, RpcResult>> = {};
  for (const method of BENCHED) {
    const probe = probeFor(client, method, site);
    out[method] = {
      sequential: await sequential(probe, s.rpcSamples, s.rpcWarmup),
      concurrent: await concurrent(probe, s.callers, s.throughputMs),
    };
  }
  return out as Record<BenchedMethod, RpcResult>;
}

interface PlugpoolPhase {
  readonly result: Omit<SizeResult, "rpc" | "loadAverage" | "site" | "baselineMemory">;
  readonly rpc: Record<BenchedMethod, RpcResult>;
  readonly rpcLoad: readonly number[];
  readonly answers: RecordedAnswers;
}

/** The CA loops, with the kube-apiserver requests and the plugpool CPU time they cost. */
async function measureCaLoops(plugpool: PlugpoolProcess, proxy: CountingProxy, site: Layout, s: BenchSettings) {
  const { client } = plugpool;
  const nodes = registeredNodes(site);
  await caLoop(client, site, nodes); // warm-up, not counted
  const before = { counts: proxy.counts(), cpu: (await plugpool.sample()).cpuSeconds, at: performance.now() };
  let rpcsPerLoop = 0;
  for (let i = 0; i < s.caLoops; i++) rpcsPerLoop = await caLoop(client, site, nodes);
  const after = { counts: proxy.counts(), cpu: (await plugpool.sample()).cpuSeconds, at: performance.now() };
  const reads = after.counts.reads - before.counts.reads;
  const writes = after.counts.writes - before.counts.writes;
  return {
    loops: s.caLoops,
    rpcsPerLoop,
    windowS: round((after.at - before.at) / 1000, 1),
    perLoop: round((reads + writes) / s.caLoops, 2),
    reads,
    writes,
    watchStarts: after.counts.watches - before.counts.watches,
    seen: after.counts.others.slice(before.counts.others.length).slice(0, 10),
    cpuMsPerLoop: round(((after.cpu - before.cpu) * 1000) / s.caLoops, 1),
  };
}

/** Everything measured on plugpool itself; it is stopped when this returns. */
async function measurePlugpool(site: Layout, configPath: string, kubeconfigPath: string, proxy: CountingProxy, s: BenchSettings, say: Say): Promise<PlugpoolPhase> {
  const count = site.machines.length;
  const profileDir = s.cpuProfile ? join(s.workDir, `cpu-profile-${count}`) : undefined;
  if (profileDir !== undefined) rmSync(profileDir, { recursive: true, force: true });
  const phases: ProfilePhase[] = [];
  const phase = (name: string): void => {
    say(`  ${name}`);
    phases.push({ name, startUs: monotonicUs() });
  };
  phase("start-up");
  const beforeStart = proxy.counts();
  const plugpool = await startPlugpool({
    configPath,
    kubeconfigPath,
    logPath: join(s.workDir, `plugpool-${count}.log`),
    entry: s.entry,
    nodeArgs: s.nodeArgs,
    ...(profileDir !== undefined && { cpuProfileDir: profileDir }),
  });
  try {
    const { client } = plugpool;
    const memoryAtStart = await plugpool.sample();
    const started = proxy.counts();
    const atStartup = {
      reads: started.reads - beforeStart.reads,
      writes: started.writes - beforeStart.writes,
      watchStarts: started.watches - beforeStart.watches,
    };
    phase("Refresh");
    const refresh = await sequential(() => client.call("refresh", {}, { deadlineMs: 10_000 }), s.refreshSamples, 2);
    phase("CA loops");
    const { cpuMsPerLoop, ...loops } = await measureCaLoops(plugpool, proxy, site, s);
    phase("RPC latency and throughput");
    const rpcLoad = load();
    const rpc = await measureRpcs(client, site, s);
    const memory = await plugpool.sample();
    phases.push({ name: "(after)", startUs: monotonicUs() });
    const [group] = site.groups;
    const [node] = registeredNodes(site);
    if (group === undefined || node === undefined) throw new Error("the site has no registered node");
    return {
      result: {
        startup: plugpool.startup,
        refresh,
        apiserver: { atStartup, ...loops },
        cpuMsPerLoop,
        memoryAtStart,
        memory,
        ...(profileDir !== undefined && { cpuProfile: { dir: profileDir, phases } }),
      },
      rpc,
      rpcLoad,
      answers: await recordAnswers(client, group, node),
    };
  } finally {
    await plugpool.stop();
  }
}

interface BaselinePhase {
  readonly rpc: Record<BenchedMethod, RpcResult>;
  readonly memory: { readonly rssBytes: number; readonly peakRssBytes: number };
}

async function measureBaseline(answers: RecordedAnswers, site: Layout, s: BenchSettings): Promise<BaselinePhase> {
  const baseline = await startBaseline(answers);
  const client = createCloudProviderClient(baseline.address);
  try {
    const rpc = await measureRpcs(client, site, s);
    return { rpc, memory: procMemory(baseline.pid) };
  } finally {
    client.close();
    await baseline.close();
  }
}

export async function runSize(plane: ControlPlane, proxy: CountingProxy, kubeconfigPath: string, count: number, s: BenchSettings, say: Say): Promise<SizeResult> {
  const site = layout(count);
  const loadAtStart = load();
  const fleet = await startFleet({
    devices: site.machines.map((m) => ({ platform: m.platform, on: m.registered, ...(m.fault && { fault: m.fault }) })),
    slowMs: SLOW_PLUG_MS,
  });
  try {
    await registerNodes(plane, registeredNodes(site));
    const configPath = join(s.workDir, `config-${count}.yaml`);
    const yaml = configYaml(site, fleet.urls);
    loadConfig(yaml, {}); // fails here, with its message, rather than in the child
    writeFileSync(configPath, yaml);
    const measured = await measurePlugpool(site, configPath, kubeconfigPath, proxy, s, say);
    say("  baseline");
    const baseline = await measureBaseline(measured.answers, site, s);
    const rpc = Object.fromEntries(BENCHED.map((m) => [m, { plugpool: measured.rpc[m], baseline: baseline.rpc[m] }]));
    return {
      site: summary(site),
      ...measured.result,
      baselineMemory: baseline.memory,
      rpc: rpc as SizeResult["rpc"],
      loadAverage: { start: loadAtStart, rpc: measured.rpcLoad, end: load() },
    };
  } finally {
    await fleet.close();
    await deleteAllNodes(plane);
  }
}
