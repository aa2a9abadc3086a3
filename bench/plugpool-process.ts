// `plugpool serve` as its own process, compiled, as the container image runs it (node dist/plugpool.mjs), started
// by the test site (tests/harness/site), optionally inside a memory-limited cgroup. Its memory and CPU are read
// from /proc (no scrape: a scrape would itself allocate in plugpool); the garbage a batch of calls makes is counted
// in the process by gc-probe.ts. Start-up is timed from the spawn, through the log lines serve() writes, to the
// first answered RPC.
import { spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stripTypeScriptTypes } from "node:module";
import type { CloudProviderClient } from "../tests/harness/grpc-client.ts";
import { startPlugpoolProcess } from "../tests/harness/site/index.ts";
import { round } from "./machine-info.ts";

export interface StartupTimes {
  /** Spawn → "starting" logged (Node started, modules loaded, config validated). */
  readonly startingMs: number;
  /** Spawn → "cluster view synced" (Nodes, pods and ResourceSlices listed and watched). */
  readonly syncedMs: number;
  /** Spawn → first NodeGroups answered over gRPC (client connect included). */
  readonly firstRpcMs: number;
}

export interface PlugpoolProcess {
  readonly pid: number;
  readonly client: CloudProviderClient;
  readonly startup: StartupTimes;
  /** Resident set now, its anonymous part, and its peak since the spawn (VmRSS, RssAnon, VmHWM), bytes. */
  memory(): ProcMemory;
  /** User + system CPU time since the spawn, ms (10 ms steps). */
  cpuMs(): number;
  /** The same for the main thread alone: the rest is V8's helper threads (parallel and concurrent GC, compilers) and libuv's. */
  mainThreadCpuMs(): number;
  /** Bytes plugpool allocated while `work` ran (all of it garbage once the calls are answered). */
  allocatedDuring<T>(work: () => Promise<T>): Promise<Allocated<T>>;
  /** What the V8 heap holds and reserves now, and the memory outside it that V8 knows of. */
  heap(): Promise<HeapReport>;
  /** SIGTERM (a CPU profile is written on a clean exit), SIGKILL after 15 s. */
  stop(): Promise<void>;
}

export interface PlugpoolProcessOptions {
  /** The module to run: a bundle (dist/plugpool.mjs), or an older revision's dist/src/app/main.js. */
  readonly entry: string;
  readonly configPath: string;
  readonly kubeconfigPath: string;
  /** plugpool's own log (JSON lines) goes here, replacing an earlier run's. */
  readonly logPath: string;
  readonly nodeArgs?: readonly string[];
  /** cgroup.procs of a memory-limited cgroup to run in. */
  readonly cgroupProcs?: string;
  /** When set, run with --cpu-prof and write the profile into this directory. */
  readonly cpuProfileDir?: string;
  /** Environment variables as the container image sets them (NODE_OPTIONS…), over the bench's own. */
  readonly env?: Readonly<Record<string, string>>;
  /** Where the probe's JavaScript is written. */
  readonly workDir: string;
}

const CLOCK_TICK_MS = 1000 / (Number(spawnSync("getconf", ["CLK_TCK"]).stdout.toString().trim()) || 100);

/** gc-probe.ts as plain JavaScript: loading TypeScript would bring the type stripper into plugpool's memory. */
export function probeModule(workDir: string): string {
  const file = join(workDir, "gc-probe.mjs");
  writeFileSync(file, stripTypeScriptTypes(readFileSync(join(import.meta.dirname, "gc-probe.ts"), "utf8")));
  return file;
}

export async function startPlugpool(options: PlugpoolProcessOptions): Promise<PlugpoolProcess> {
  rmSync(options.logPath, { force: true });
  const started = await startPlugpoolProcess({
    entry: options.entry,
    configPath: options.configPath,
    kubeconfigPath: options.kubeconfigPath,
    logPath: options.logPath,
    // plugpool's default level, as the image runs it.
    logLevel: "info",
    nodeArgs: [
      ...(options.nodeArgs ?? []),
      `--import=${probeModule(options.workDir)}`,
      ...(options.cpuProfileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`]),
    ],
    env: { NODE_OPTIONS: "", ...options.env },
    inheritEnv: true,
    ipc: true,
    ...(options.cgroupProcs !== undefined && { cgroupProcs: options.cgroupProcs }),
    timeoutMs: Number.POSITIVE_INFINITY,
  });
  const stop = (): Promise<void> => started.stop(15_000);
  try {
    const { client, pid, child } = started;
    const first = await client.call("nodeGroups", {});
    if (first.error) throw new Error(`first NodeGroups failed: ${first.error.message}`);
    const startup = {
      startingMs: round(started.startup.starting ?? Number.NaN, 0),
      syncedMs: round(started.startup["cluster view synced"] ?? Number.NaN, 0),
      firstRpcMs: round(performance.now() - started.spawnedAt, 0),
    };
    return {
      pid,
      client,
      startup,
      memory: () => procMemory(pid),
      cpuMs: () => procCpuMs(pid),
      mainThreadCpuMs: () => threadCpuMs(pid, pid),
      allocatedDuring: (work) => allocatedDuring(child, work),
      heap: async () => (await ask(child, "heap")) as HeapReport,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

export interface HeapReport {
  /** Reserved by the V8 heap (every space), of which `usedBytes` holds objects and `youngBytes` is the young generation. */
  readonly totalBytes: number;
  readonly usedBytes: number;
  readonly youngBytes: number;
  /** Outside the heap but known to V8: buffers and external strings (the bundle's source text among them). */
  readonly externalBytes: number;
}

export interface Allocated<T> {
  readonly result: T;
  readonly bytes: number;
  /** The main thread's pauses for GC of the young generation and of the old one while `work` ran. */
  readonly youngGcMs: number;
  readonly oldGcMs: number;
  /** Full (mark-compact) collections that ended while `work` ran. */
  readonly fullGcs: number;
  /** What young-generation collections moved to the old generation while `work` ran. */
  readonly promotedBytes: number;
}

/** Bytes a process running gc-probe.ts allocated while `work` ran, and its GC pauses meanwhile. */
export async function allocatedDuring<T>(child: ChildProcess, work: () => Promise<T>): Promise<Allocated<T>> {
  await ask(child, "start");
  const result = await work();
  const { allocatedBytes, youngGcMs, oldGcMs, fullGcs, promotedBytes } = (await ask(child, "stop")) as Omit<Allocated<T>, "result" | "bytes"> & { allocatedBytes: number };
  return { result, bytes: allocatedBytes, youngGcMs, oldGcMs, fullGcs, promotedBytes };
}

function ask(child: ChildProcess, message: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onExit = (): void => { reject(new Error("plugpool exited")); };
    child.once("exit", onExit);
    child.once("message", (reply) => {
      child.off("exit", onExit);
      resolve(reply);
    });
    child.send(message);
  });
}

export interface ProcMemory {
  readonly rssBytes: number;
  /**
   * The part of the RSS that is the process's own memory; the rest is file pages, mostly the node binary's own
   * code and data, shared with every process that maps them and dropped first under memory pressure.
   */
  readonly anonBytes: number;
  readonly peakRssBytes: number;
}

/** Resident memory of any process, from /proc (NaN where there is no /proc). */
export function procMemory(pid: number): ProcMemory {
  let status = "";
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    // not Linux, or gone
  }
  const kib = (field: string): number => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
    return match?.[1] === undefined ? Number.NaN : Number(match[1]) * 1024;
  };
  return { rssBytes: kib("VmRSS"), anonBytes: kib("RssAnon"), peakRssBytes: kib("VmHWM") };
}

/** utime + stime of a process, ms (fields 14 and 15 of /proc/<pid>/stat, after the command name). */
export function procCpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/stat`);
}

/** utime + stime of one thread of a process (its main thread: tid = pid), ms. */
export function threadCpuMs(pid: number, tid: number): number {
  return statCpuMs(`/proc/${pid}/task/${tid}/stat`);
}

function statCpuMs(path: string): number {
  try {
    const stat = readFileSync(path, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS;
  } catch {
    return Number.NaN;
  }
}
