// One size of the bench, start to finish: plugs and Nodes once; then, for each memory condition (inside the
// example Deployment's limit, and without one), plugpool in its own process driven at cluster-autoscaler's
// cadence — one full CA loop every 10 s, idle in between as a real CA leaves it — with a floor client of the
// condition's own reading the plugs in the middle of each gap; then the benchmarked RPCs, one call at a time,
// taking turns with the same calls to the transport baselines started for the condition.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { loadConfig } from "../src/app/config/index.ts";
import { createCloudProviderClient, type CloudProviderClient } from "../tests/harness/grpc-client.ts";
import type { ControlPlane } from "../tests/harness/control-plane/index.ts";
import type { ImageRuntime } from "./image-env.ts";
import { BENCHED, recordAnswers, startBaseline, type BaselineServer, type BenchedMethod } from "./baseline.ts";
import type { MemoryCgroup } from "./cgroup.ts";
import { deleteAllNodes, registerForeignNodes, registerNodes } from "./cluster-fixture.ts";
import type { CountingProxy } from "./counting-proxy.ts";
import { startFleet, type Fleet } from "./fleet.ts";
import { startFloor, type Floor, type FloorRefresh } from "./floor.ts";
import { interleaved, summarise, type LatencySummary } from "./latency.ts";
import { configYaml, layout, PLUG_TIMEOUT_MS, RELAY_PATH, SLOW_PLUG_MS, summary, type Layout } from "./layout.ts";
import { load, round } from "./machine-info.ts";
import { probeModule, startPlugpool, type Allocated, type HeapReport, type PlugpoolProcess, type StartupTimes } from "./plugpool-process.ts";
import { caLoopAfterRefresh, probeFor, registeredNodes } from "./probes.ts";

export interface BenchSettings {
  /** CA loops per condition; the first `warmupLoops` are not counted. */
  readonly loops: number;
  readonly warmupLoops: number;
  /** One CA loop starts every `cadenceMs` (CA's --scan-interval, 10 s by default). */
  readonly cadenceMs: number;
  readonly rpcSamples: number;
  readonly rpcWarmup: number;
  /** Where configs, plugpool logs (and CPU profiles) go. */
  readonly workDir: string;
  readonly cpuProfile: boolean;
  /** Extra Node.js options for plugpool's process, after the image's (experiments: heap limits, flags). */
  readonly nodeArgs: readonly string[];
  /** Nodes of realistic size, matching no machine, in the cluster besides the machines' (0: none). */
  readonly foreignNodes: number;
}

/** A plugpool to measure: the working tree's, or a revision's (see build() in run.ts). */
export interface Build {
  /** Short, for file names: "tree", or the revision. */
  readonly name: string;
  /** The module to run. */
  readonly entry: string;
  /** How that revision's container image runs node. */
  readonly image: ImageRuntime;
}

/** Which plugpool runs, and where: inside a memory-limited cgroup, or not. */
export interface Condition {
  readonly label: string;
  readonly build: Build;
  readonly cgroup?: MemoryCgroup;
}

export interface Share {
  readonly mean: number;
  readonly max: number;
}

/** A floor client's Refreshes. */
export interface FloorResult {
  readonly refresh: LatencySummary;
  readonly cpuMs: Share;
  readonly answered: number;
}

export interface ConditionResult {
  readonly label: string;
  readonly cgroup?: { readonly where: string; readonly peakBytes: number; readonly oomKills: number };
  readonly startup: StartupTimes;
  readonly rssAtStartBytes: number;
  /** VmRSS sampled every second over the second half of the loops; `anonMaxBytes`: the most of it that was RssAnon. */
  readonly rssPlateau: { readonly samples: number; readonly medianBytes: number; readonly maxBytes: number; readonly anonMaxBytes: number };
  readonly peakRssBytes: number;
  /** At the end of the loops: the RSS's anonymous part and what V8 accounts for of it. */
  readonly memoryAtEnd: { readonly anonBytes: number; readonly heap: HeapReport };
  /** plugpool's CPU over the counted loops (idle gaps included) per loop. */
  readonly cpuMsPerLoop: number;
  readonly rpcsPerLoop: number;
  readonly refresh: LatencySummary;
  readonly refreshCpuMs: Share;
  /** Of it, the main thread's; the rest ran on V8's helper threads (and libuv's). */
  readonly refreshMainThreadCpuMs: Share;
  /**
   * The Refreshes with a full (mark-compact) collection ending in them, and the CPU of those with and without one:
   * where V8's full collections fall moves a Refresh's CPU more than anything in it.
   */
  readonly refreshFullGc: { readonly refreshes: number; readonly withCpuMs?: Share; readonly withoutCpuMs?: Share };
  readonly refreshGarbageBytes: Share;
  /** The main thread's GC pauses during a Refresh: young generation, old generation. */
  readonly refreshGcMs: { readonly young: Share; readonly old: Share };
  /** The rest of a loop: every RPC after its Refresh. */
  readonly loopRpcGarbageBytes: Share;
  /** What young collections moved to the old generation during a Refresh, and during the rest of its loop. */
  readonly promotedBytes: { readonly refresh: Share; readonly rest: Share };
  readonly floor: FloorResult;
  /** The same reads through ky over plugpool's undici Agent: what plugpool's HTTP client costs at the least. */
  readonly kyFloor: FloorResult;
  /** Requests per CA loop besides the Leases', the Leases' (renewing plugpool's own, following CA's), watch starts. */
  readonly apiserver: { readonly loops: number; readonly perLoop: number; readonly leasePerLoop: number; readonly watchStarts: number; readonly seen: readonly string[] };
  readonly rpc: Readonly<Record<BenchedMethod, RpcResult>>;
  /** The bare Connect server with Node.js defaults, its calls taking turns with `rpc`'s: the goal's yardstick. */
  readonly baseline: Readonly<Record<BenchedMethod, RpcResult>>;
  /**
   * The same bare server run with the image's environment (its heap flags), in the same turns: what of
   * plugpool's tail is the young generation it is given rather than its own work. Shown, not judged.
   */
  readonly baselineImageEnv: Readonly<Record<BenchedMethod, RpcResult>>;
  /**
   * plugpool on its own right after, its calls back to back: taking turns leaves each server the other two's calls
   * of idle between its own, which CA's loop does not, so this shows what those gaps are worth to plugpool's tail.
   */
  readonly alone: Readonly<Record<BenchedMethod, LatencySummary>>;
  readonly cpuProfileDir?: string;
}

/** One RPC's samples against one server: latency, garbage per call, and the GC pauses among them. */
export interface RpcResult {
  readonly latency: LatencySummary;
  readonly garbageBytesPerCall: number;
  /** Main-thread GC pauses while the samples (and their warm-up) ran, young / old generation, in total. */
  readonly gcMs: { readonly young: number; readonly old: number };
}

export interface SizeResult {
  readonly site: ReturnType<typeof summary>;
  /** The Nodes that match no machine: how many, and the size of one as JSON. */
  readonly foreignNodes: { readonly count: number; readonly bytesEach: number };
  readonly conditions: readonly ConditionResult[];
  readonly loadAverage: { readonly start: readonly number[]; readonly end: readonly number[] };
}

type Say = (text: string) => void;

const share = (values: readonly number[]): Share => ({
  mean: values.reduce((a, b) => a + b, 0) / Math.max(1, values.length),
  max: Math.max(...values),
});

function median(values: readonly number[]): number {
  const sorted = values.toSorted((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function sleepUntil(at: number): Promise<void> {
  const wait = at - performance.now();
  if (wait > 0) await sleep(wait);
}

interface LoopSample {
  readonly refreshMs: number;
  readonly refreshCpuMs: number;
  readonly refreshMainThreadCpuMs: number;
  readonly refreshFullGcs: number;
  readonly refreshBytes: number;
  readonly refreshGcMs: { readonly young: number; readonly old: number };
  readonly rpcBytes: number;
  readonly promoted: { readonly refresh: number; readonly rest: number };
  readonly rpcs: number;
}

/** The counted loops' Refreshes with a full collection ending in them, and the CPU of those with and without one. */
function fullGcSplit(loops: readonly LoopSample[]): ConditionResult["refreshFullGc"] {
  const withOne = loops.filter((l) => l.refreshFullGcs > 0).map((l) => l.refreshCpuMs);
  const without = loops.filter((l) => l.refreshFullGcs === 0).map((l) => l.refreshCpuMs);
  return {
    refreshes: withOne.length,
    ...(withOne.length > 0 && { withCpuMs: share(withOne) }),
    ...(without.length > 0 && { withoutCpuMs: share(without) }),
  };
}

/** One CA loop: a timed Refresh (its CPU and garbage counted apart), then the rest of the loop. */
async function caLoop(plugpool: PlugpoolProcess, site: Layout): Promise<LoopSample> {
  const { client } = plugpool;
  // CPU counted around the RPC alone: the garbage probe's own start and stop are not the Refresh's.
  const refresh = await plugpool.allocatedDuring(async () => {
    const cpuBefore = plugpool.cpuMs();
    const mainBefore = plugpool.mainThreadCpuMs();
    const started = performance.now();
    const { error } = await client.call("refresh", {}, { deadlineMs: 10_000 });
    if (error) throw new Error(`Refresh failed in a CA loop: ${error.message}`);
    return { ms: performance.now() - started, cpuMs: plugpool.cpuMs() - cpuBefore, mainThreadCpuMs: plugpool.mainThreadCpuMs() - mainBefore };
  });
  const rest = await plugpool.allocatedDuring(() => caLoopAfterRefresh(client, site, registeredNodes(site)));
  return {
    refreshMs: refresh.result.ms,
    refreshCpuMs: refresh.result.cpuMs,
    refreshMainThreadCpuMs: refresh.result.mainThreadCpuMs,
    refreshFullGcs: refresh.fullGcs,
    refreshBytes: refresh.bytes,
    refreshGcMs: { young: refresh.youngGcMs, old: refresh.oldGcMs },
    rpcBytes: rest.bytes,
    promoted: { refresh: refresh.promotedBytes, rest: rest.promotedBytes },
    rpcs: rest.result + 1,
  };
}

interface Run {
  readonly site: Layout;
  readonly configPath: string;
  readonly kubeconfigPath: string;
  readonly proxy: CountingProxy;
  readonly fleet: Fleet;
  readonly s: BenchSettings;
  readonly say: Say;
}

/** Everything measured on plugpool in one condition; it is stopped when this returns. */
async function measureCondition(run: Run, condition: Condition): Promise<ConditionResult> {
  const { site, proxy, fleet, s, say } = run;
  const count = site.machines.length;
  const tag = `${count}-${condition.build.name}-${condition.cgroup === undefined ? "unlimited" : "limited"}`;
  const profileDir = s.cpuProfile ? join(s.workDir, `cpu-profile-${tag}`) : undefined;
  if (profileDir !== undefined) rmSync(profileDir, { recursive: true, force: true });
  say(`  ${condition.label}: start-up`);
  // A floor process per condition, as old as plugpool in it: the floor's CPU per Refresh keeps falling over its
  // first few dozen Refreshes (one measured 102 ms per Refresh over its 3rd to 24th, 73 ms over its 27th to
  // 48th), so one floor for both conditions held the second condition's new plugpool to an older floor.
  const floor = await startFloor({ urls: fleet.urls, path: RELAY_PATH, timeoutMs: PLUG_TIMEOUT_MS, client: "node:http" });
  const kyFloor = await startFloor({ urls: fleet.urls, path: RELAY_PATH, timeoutMs: PLUG_TIMEOUT_MS, client: "ky" });
  const plugpool = await startPlugpool({
    configPath: run.configPath,
    kubeconfigPath: run.kubeconfigPath,
    logPath: join(s.workDir, `plugpool-${tag}.log`),
    entry: condition.build.entry,
    nodeArgs: [...condition.build.image.nodeArgs, ...s.nodeArgs],
    env: condition.build.image.env,
    workDir: s.workDir,
    ...(condition.cgroup !== undefined && { cgroupProcs: condition.cgroup.procs }),
    ...(profileDir !== undefined && { cpuProfileDir: profileDir }),
  }).catch(async (error: unknown) => {
    await Promise.all([floor.close(), kyFloor.close()]);
    throw error;
  });
  try {
    const rssAtStartBytes = plugpool.memory().rssBytes;
    say(`  ${condition.label}: ${s.loops} CA loops, one every ${s.cadenceMs / 1000} s`);
    const rss: { at: number; bytes: number; anonBytes: number }[] = [];
    const sampler = setInterval(() => {
      const { rssBytes, anonBytes } = plugpool.memory();
      rss.push({ at: performance.now(), bytes: rssBytes, anonBytes });
    }, 1000);
    const loops: LoopSample[] = [];
    const floorRefreshes: Awaited<ReturnType<Floor["refresh"]>>[] = [];
    const kyFloorRefreshes: Awaited<ReturnType<Floor["refresh"]>>[] = [];
    const t0 = performance.now();
    let counted = { cpuMs: 0, requests: proxy.counts() };
    try {
      for (let i = 0; i < s.loops; i++) {
        await sleepUntil(t0 + i * s.cadenceMs);
        if (i === s.warmupLoops) counted = { cpuMs: plugpool.cpuMs(), requests: proxy.counts() };
        const loop = await caLoop(plugpool, site);
        if (i >= s.warmupLoops) loops.push(loop);
        await sleepUntil(t0 + i * s.cadenceMs + s.cadenceMs / 2);
        const f = await floor.refresh();
        if (i >= s.warmupLoops) floorRefreshes.push(f);
        await sleepUntil(t0 + i * s.cadenceMs + (s.cadenceMs * 3) / 4);
        const k = await kyFloor.refresh();
        if (i >= s.warmupLoops) kyFloorRefreshes.push(k);
      }
      await sleepUntil(t0 + s.loops * s.cadenceMs);
    } finally {
      clearInterval(sampler);
    }
    const n = s.loops - s.warmupLoops;
    const cpuMsPerLoop = (plugpool.cpuMs() - counted.cpuMs) / n;
    const requests = proxy.counts();
    const reads = requests.reads - counted.requests.reads;
    const writes = requests.writes - counted.requests.writes;
    const half = t0 + (s.loops * s.cadenceMs) / 2;
    const plateauSamples = rss.filter((r) => r.at >= half);
    const plateau = plateauSamples.map((r) => r.bytes);
    const memoryAtEnd = { anonBytes: plugpool.memory().anonBytes, heap: await plugpool.heap() };
    say(`  ${condition.label}: RPC latency and garbage, taking turns with the baselines`);
    const { rpc, baseline, baselineImageEnv, alone } = await measureRpcs(plugpool, site, s, condition.build.image);
    return {
      label: condition.label,
      ...(condition.cgroup !== undefined && {
        cgroup: { where: condition.cgroup.where, peakBytes: condition.cgroup.peakBytes(), oomKills: condition.cgroup.oomKills() },
      }),
      startup: plugpool.startup,
      rssAtStartBytes,
      rssPlateau: {
        samples: plateau.length,
        medianBytes: median(plateau),
        maxBytes: Math.max(...plateau),
        anonMaxBytes: Math.max(...plateauSamples.map((r) => r.anonBytes)),
      },
      peakRssBytes: plugpool.memory().peakRssBytes,
      memoryAtEnd,
      cpuMsPerLoop: round(cpuMsPerLoop, 0),
      rpcsPerLoop: loops[0]?.rpcs ?? 0,
      refresh: summarise(loops.map((l) => l.refreshMs), 0),
      refreshCpuMs: share(loops.map((l) => l.refreshCpuMs)),
      refreshMainThreadCpuMs: share(loops.map((l) => l.refreshMainThreadCpuMs)),
      refreshFullGc: fullGcSplit(loops),
      refreshGarbageBytes: share(loops.map((l) => l.refreshBytes)),
      refreshGcMs: { young: share(loops.map((l) => l.refreshGcMs.young)), old: share(loops.map((l) => l.refreshGcMs.old)) },
      loopRpcGarbageBytes: share(loops.map((l) => l.rpcBytes)),
      promotedBytes: { refresh: share(loops.map((l) => l.promoted.refresh)), rest: share(loops.map((l) => l.promoted.rest)) },
      floor: floorResult(floorRefreshes),
      kyFloor: floorResult(kyFloorRefreshes),
      apiserver: {
        loops: n,
        perLoop: round((reads + writes) / n, 2),
        watchStarts: requests.watches - counted.requests.watches,
        leasePerLoop: round((requests.leases - counted.requests.leases) / n, 2),
        seen: requests.others.slice(counted.requests.others.length).slice(0, 10),
      },
      rpc,
      baseline,
      baselineImageEnv,
      alone,
      ...(profileDir !== undefined && { cpuProfileDir: profileDir }),
    };
  } finally {
    try {
      await plugpool.stop();
    } finally {
      await Promise.all([floor.close(), kyFloor.close()]);
    }
  }
}

function floorResult(refreshes: readonly FloorRefresh[]): FloorResult {
  return {
    refresh: summarise(refreshes.map((f) => f.ms), 0),
    cpuMs: share(refreshes.map((f) => f.cpuMs)),
    answered: Math.min(...refreshes.map((f) => f.answered)),
  };
}

type Probed = Pick<PlugpoolProcess, "allocatedDuring">;
type Measured = Omit<Allocated<unknown>, "result">;

/** What each of `servers` allocated (and its GC pauses) while `work` ran. */
async function allocatedInEach<T>(servers: readonly Probed[], work: () => Promise<T>): Promise<{ result: T; each: Measured[] }> {
  const [first, ...rest] = servers;
  if (first === undefined) return { result: await work(), each: [] };
  const outer = await first.allocatedDuring(() => allocatedInEach(rest, work));
  return { result: outer.result.result, each: [outer, ...outer.result.each] };
}

/**
 * Each benchmarked RPC against plugpool and against two bare Connect servers answering what plugpool answered
 * (with Node.js defaults, and with the image's environment), the three taking turns call by call; then against
 * plugpool alone, back to back.
 */
async function measureRpcs(
  plugpool: PlugpoolProcess,
  site: Layout,
  s: BenchSettings,
  image: ImageRuntime,
): Promise<Pick<ConditionResult, "rpc" | "baseline" | "baselineImageEnv" | "alone">> {
  const [group] = site.groups;
  const [node] = registeredNodes(site);
  if (group === undefined || node === undefined) throw new Error("the site has no registered node");
  const answers = await recordAnswers(plugpool.client, group, node);
  const gcProbe = probeModule(s.workDir);
  const bare = await startBaseline(answers, gcProbe);
  const started: { server: BaselineServer; client: CloudProviderClient }[] = [{ server: bare, client: createCloudProviderClient(bare.address) }];
  try {
    const imageEnv = await startBaseline(answers, gcProbe, image);
    started.push({ server: imageEnv, client: createCloudProviderClient(imageEnv.address) });
    const servers = [{ probed: plugpool, client: plugpool.client }, ...started.map((b) => ({ probed: b.server, client: b.client }))];
    const out = servers.map((): Partial<Record<BenchedMethod, RpcResult>> => ({}));
    const alone: Partial<Record<BenchedMethod, LatencySummary>> = {};
    for (const method of BENCHED) {
      const probes = servers.map((server) => probeFor(server.client, method, site));
      const { result, each } = await allocatedInEach(
        servers.map((server) => server.probed),
        () => interleaved(probes, s.rpcSamples, s.rpcWarmup),
      );
      out.forEach((o, i) => {
        const latency = result[i];
        const allocated = each[i];
        if (latency === undefined || allocated === undefined) throw new Error(`no samples for server ${String(i)}`);
        o[method] = {
          latency,
          garbageBytesPerCall: allocated.bytes / (s.rpcSamples + s.rpcWarmup),
          gcMs: { young: allocated.youngGcMs, old: allocated.oldGcMs },
        };
      });
      [alone[method]] = await interleaved([probeFor(plugpool.client, method, site)], s.rpcSamples, s.rpcWarmup);
    }
    const [rpc, baseline, baselineImageEnv] = out as Record<BenchedMethod, RpcResult>[];
    if (rpc === undefined || baseline === undefined || baselineImageEnv === undefined) throw new Error("a server was not measured");
    return { rpc, baseline, baselineImageEnv, alone: alone as Record<BenchedMethod, LatencySummary> };
  } finally {
    for (const { server, client } of started) {
      client.close();
      await server.close();
    }
  }
}

export async function runSize(
  plane: ControlPlane,
  proxy: CountingProxy,
  kubeconfigPath: string,
  count: number,
  conditions: readonly Condition[],
  s: BenchSettings,
  say: Say,
): Promise<SizeResult> {
  const site = layout(count);
  const loadAtStart = load();
  const fleet = await startFleet({
    devices: site.machines.map((m) => ({ platform: m.platform, on: m.registered, ...(m.fault && { fault: m.fault }) })),
    slowMs: SLOW_PLUG_MS,
  });
  try {
    await registerNodes(plane, registeredNodes(site));
    let bytesEach = 0;
    if (s.foreignNodes > 0) {
      say(`${s.foreignNodes} Nodes that match no machine`);
      bytesEach = await registerForeignNodes(plane, s.foreignNodes);
    }
    const configPath = join(s.workDir, `config-${count}.yaml`);
    const yaml = configYaml(site, fleet.urls);
    loadConfig(yaml, {}); // fails here, with its message, rather than in the child
    writeFileSync(configPath, yaml);
    const run: Run = { site, configPath, kubeconfigPath, proxy, fleet, s, say };
    const results: ConditionResult[] = [];
    for (const condition of conditions) results.push(await measureCondition(run, condition));
    return { site: summary(site), foreignNodes: { count: s.foreignNodes, bytesEach }, conditions: results, loadAverage: { start: loadAtStart, end: load() } };
  } finally {
    await fleet.close();
    await deleteAllNodes(plane);
  }
}
