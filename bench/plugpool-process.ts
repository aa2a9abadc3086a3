// `plugpool serve` as its own process (node src/app/main.ts), so that its memory and CPU are its own: the
// bench reads them from plugpool's /metrics and from /proc. Start-up is timed from the spawn, through the
// log lines serve() writes, to the first answered RPC.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { createCloudProviderClient, type CloudProviderClient } from "../tests/support/grpc-client.ts";
import { round } from "./machine-info.ts";

export interface StartupTimes {
  /** Spawn → "starting" logged (Node started, modules loaded, config validated). */
  readonly startingMs: number;
  /** Spawn → "cluster view synced" (Nodes, pods and ResourceSlices listed and watched). */
  readonly syncedMs: number;
  /** Spawn → "serving" (gRPC listening). */
  readonly servingMs: number;
  /** Spawn → first NodeGroups answered over gRPC (client connect included). */
  readonly firstRpcMs: number;
}

export interface ProcessSample {
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  readonly heapTotalBytes: number;
  readonly externalBytes: number;
  /** Peak resident set since the spawn (VmHWM). */
  readonly peakRssBytes: number;
  readonly cpuSeconds: number;
}

export interface PlugpoolProcess {
  readonly pid: number;
  readonly client: CloudProviderClient;
  readonly startup: StartupTimes;
  /** Reads plugpool's /metrics and /proc/<pid>/status. */
  sample(): Promise<ProcessSample>;
  /** SIGTERM (a CPU profile is written on a clean exit), SIGKILL after 15 s. */
  stop(): Promise<void>;
}

export interface PlugpoolProcessOptions {
  /** The main module: src/app/main.ts, or main.js of a build. */
  readonly entry: string;
  readonly configPath: string;
  readonly kubeconfigPath: string;
  /** plugpool's own log (JSON lines) goes here. */
  readonly logPath: string;
  readonly nodeArgs?: readonly string[];
  /** When set, run with --cpu-prof and write the profile into this directory. */
  readonly cpuProfileDir?: string;
}

// The kernel kills the child if the bench dies, even by SIGKILL (as the test control plane does).
const hasSetpriv = spawnSync("setpriv", ["--pdeathsig", "KILL", "--", "true"]).status === 0;

export async function startPlugpool(options: PlugpoolProcessOptions): Promise<PlugpoolProcess> {
  const nodeArgs = [
    ...(options.nodeArgs ?? []),
    ...(options.cpuProfileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`]),
    options.entry, "serve", "--config", options.configPath, "--kubeconfig", options.kubeconfigPath,
  ];
  const spawned = performance.now();
  const child = hasSetpriv
    ? spawn("setpriv", ["--pdeathsig", "KILL", "--", process.execPath, ...nodeArgs], { stdio: ["ignore", "pipe", "pipe"] })
    : spawn(process.execPath, nodeArgs, { stdio: ["ignore", "pipe", "pipe"] });
  const killOnExit = (): void => { child.kill("SIGKILL"); };
  process.once("exit", killOnExit);
  const exited = new Promise<void>((resolve) => child.once("exit", () => { resolve(); }));
  try {
    const { marks, grpc, ops } = await readStartup(child, options.logPath, spawned);
    const client = createCloudProviderClient(grpc);
    const first = await client.call("nodeGroups", {});
    if (first.error) throw new Error(`first NodeGroups failed: ${first.error.message}`);
    const startup = { ...marks, firstRpcMs: round(performance.now() - spawned, 0) };
    const pid = child.pid ?? 0;
    return {
      pid,
      client,
      startup,
      sample: () => sample(pid, ops),
      stop: async () => {
        client.close();
        await stop(child, exited);
        process.off("exit", killOnExit);
      },
    };
  } catch (error) {
    await stop(child, exited);
    process.off("exit", killOnExit);
    throw error;
  }
}

interface LogLine {
  readonly message?: string;
  readonly grpc?: string;
  readonly ops?: number;
}

/** Copies the child's output to the log file and resolves once it logs "serving" (rejects if it exits first). */
function readStartup(child: ChildProcess, logPath: string, spawned: number) {
  const log = createWriteStream(logPath);
  child.stderr?.pipe(log, { end: false });
  child.once("close", () => log.end());
  const lines = createInterface({ input: child.stdout ?? process.stdin });
  const at: Record<string, number> = {};
  return new Promise<{ marks: Omit<StartupTimes, "firstRpcMs">; grpc: string; ops: number }>((resolve, reject) => {
    child.once("exit", (code) => {
      reject(new Error(`plugpool exited (${String(code)}) before serving; see ${logPath}`));
    });
    lines.on("line", (text) => {
      log.write(`${text}\n`);
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        return;
      }
      if (line.message !== undefined) at[line.message] ??= round(performance.now() - spawned, 0);
      if (line.message === "serving" && line.grpc !== undefined && line.ops !== undefined) {
        resolve({
          marks: { startingMs: at.starting ?? Number.NaN, syncedMs: at["cluster view synced"] ?? Number.NaN, servingMs: at.serving ?? Number.NaN },
          grpc: line.grpc,
          ops: line.ops,
        });
      }
    });
  });
}

async function sample(pid: number, opsPort: number): Promise<ProcessSample> {
  const text = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
  // prom-client's default metrics under plugpool's prefix, whatever the prefix is exactly.
  const metric = (name: string): number => {
    const match = new RegExp(`^plugpool_(?:\\w+_)?${name} ([0-9.e+-]+)`, "m").exec(text);
    return match?.[1] === undefined ? Number.NaN : Number(match[1]);
  };
  return {
    rssBytes: metric("process_resident_memory_bytes"),
    heapUsedBytes: metric("nodejs_heap_size_used_bytes"),
    heapTotalBytes: metric("nodejs_heap_size_total_bytes"),
    externalBytes: metric("nodejs_external_memory_bytes"),
    peakRssBytes: procMemory(pid).peakRssBytes,
    cpuSeconds: metric("process_cpu_seconds_total"),
  };
}

/** Resident memory of any process, from /proc (NaN where there is no /proc). */
export function procMemory(pid: number): { readonly rssBytes: number; readonly peakRssBytes: number } {
  let status = "";
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    // not Linux
  }
  const kib = (field: string): number => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
    return match?.[1] === undefined ? Number.NaN : Number(match[1]) * 1024;
  };
  return { rssBytes: kib("VmRSS"), peakRssBytes: kib("VmHWM") };
}

async function stop(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(timer);
}
