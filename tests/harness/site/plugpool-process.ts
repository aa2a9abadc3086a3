// `plugpool serve` as its own process, run as the container image runs it (node dist/plugpool.mjs; build it with
// npm run bundle), or from its TypeScript source, or any other build: its JSON log lines kept in memory (and in a
// file when asked), when each message was first logged, a wait until it serves, and a gRPC client of it, as
// cluster-autoscaler beside it would call it. It dies with the test process, however that ends.
import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { ChildProcess } from "node:child_process";
import { createCloudProviderClient, type CloudProviderClient } from "../grpc-client.ts";
import { withHostname } from "../control-plane/process.ts";
import { answersOk } from "../control-plane/readiness.ts";

const repo = join(import.meta.dirname, "..", "..", "..");
/** The bundle the image runs (npm run bundle). */
export const BUNDLE = join(repo, "dist", "plugpool.mjs");
/** plugpool's TypeScript source, run by Node.js as it is. */
export const SOURCE = join(repo, "src", "app", "main.ts");

// setpriv asks the kernel to SIGKILL the process when this one dies, even by SIGKILL, when no handler can run.
const deathSignal = ["setpriv", "--pdeathsig", "KILL", "--"];
const hasSetpriv = spawnSync(deathSignal[0] ?? "", [...deathSignal.slice(1), "true"]).status === 0;

export interface PlugpoolProcessOptions {
  /** Its pod's name (POD_NAME): plugpool's Lease names its holder by it (default none: the hostname does). */
  readonly name?: string;
  readonly configPath: string;
  readonly kubeconfigPath: string;
  /** The module it runs: BUNDLE (the default), SOURCE, or another build of plugpool. */
  readonly entry?: string;
  /** --log-level (default debug). */
  readonly logLevel?: string;
  /** Node.js options before the module: `--import` of a probe, heap flags. */
  readonly nodeArgs?: readonly string[];
  /** Its environment: PATH, POD_NAME, then these; with `inheritEnv`, all of this process's under these. */
  readonly env?: Readonly<Record<string, string>>;
  readonly inheritEnv?: boolean;
  /** The hostname it runs under, its pod's (see withHostname): cluster-autoscaler's Lease names its holder by it. */
  readonly hostname?: string;
  /** cgroup.procs of a cgroup to run in (one with a memory limit): it joins it before plugpool starts. */
  readonly cgroupProcs?: string;
  /** An IPC channel to it (a probe loaded with `nodeArgs` may answer on it). */
  readonly ipc?: boolean;
  /** Its output (the JSON lines and stderr) is appended to this file as well. */
  readonly logPath?: string;
  /** What it must reach before this resolves: its "serving" log line (the default), or /readyz answering 200 too. */
  readonly ready?: "serving" | "readyz";
  /** How long it has for that (default 30 s; Infinity waits as long as it runs). */
  readonly timeoutMs?: number;
}

export interface PlugpoolProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Its log lines so far, parsed. */
  readonly lines: Record<string, unknown>[];
  /** Milliseconds from the spawn to the first line of each message: "starting", "cluster view synced", "serving"… */
  readonly startup: Readonly<Record<string, number>>;
  /** When it was spawned (performance.now()). */
  readonly spawnedAt: number;
  /** Where it serves gRPC (host:port) and its ops endpoints (port), as its "serving" line says. */
  readonly grpcAddress: string;
  readonly opsPort: number;
  readonly client: CloudProviderClient;
  /** Log lines from index `from` on with this message. */
  logged(message: string, from?: number): Record<string, unknown>[];
  /** Its stderr and the last lines of its log, for failure messages. */
  tail(lines?: number): string;
  running(): boolean;
  /** SIGKILL (a frozen one is woken first, so that it dies); resolves once it has exited. Idempotent. */
  kill(): Promise<void>;
  /** kill(), and the client closed. */
  close(): Promise<void>;
  /** The client closed, the IPC channel too, then SIGTERM, SIGKILL after `graceMs` (default 10 s); resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
  /** SIGSTOP: frozen as a paused VM is, its timers and sockets with it. */
  freeze(): void;
  /** SIGCONT after `freeze`. */
  thaw(): void;
}

/** Throws unless dist/ holds a bundle of the current src/ (what `npm run bundle` made). */
export function assertBuilt(): void {
  const built = (() => {
    try {
      return statSync(BUNDLE).mtimeMs;
    } catch {
      return undefined;
    }
  })();
  if (built === undefined) throw new Error(`${BUNDLE} is missing: run npm run bundle first`);
  const newest = newestMtime(join(repo, "src"));
  if (newest > built) throw new Error(`${BUNDLE} is older than src/: run npm run bundle first`);
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** The command line: node and its arguments, under the hostname, the death signal and the cgroup asked for. */
function commandLine(options: PlugpoolProcessOptions): string[] {
  const args = [
    ...(options.nodeArgs ?? []),
    options.entry ?? BUNDLE, "serve", "--config", options.configPath, "--kubeconfig", options.kubeconfigPath, "--log-level", options.logLevel ?? "debug",
  ];
  const named = options.hostname === undefined ? { binary: process.execPath, args } : withHostname(options.hostname, process.execPath, args);
  const command = [...(hasSetpriv ? deathSignal : []), named.binary, ...named.args];
  // The shell joins the cgroup, then becomes plugpool (same pid), so nothing runs outside it.
  return options.cgroupProcs === undefined ? command : ["sh", "-c", `echo $$ > "$0" && exec "$@"`, options.cgroupProcs, ...command];
}

/** Starts `plugpool serve`; resolves once it is ready, or rejects (having killed it) if it exits or runs out of time first. */
export async function startPlugpoolProcess(options: PlugpoolProcessOptions): Promise<PlugpoolProcess> {
  const name = options.name ?? "plugpool";
  const [file = "", ...args] = commandLine(options);
  const env = {
    ...(options.inheritEnv === true ? process.env : { PATH: process.env.PATH ?? "" }),
    ...(options.name !== undefined && { POD_NAME: options.name }),
    ...options.env,
  };
  const spawnedAt = performance.now();
  const child = spawn(file, args, { env, stdio: ["ignore", "pipe", "pipe", ...(options.ipc === true ? ["ipc" as const] : [])] });
  const killOnExit = (): void => { child.kill("SIGKILL"); };
  process.once("exit", killOnExit);
  // Wakes the wait for readiness at each log line and at the exit.
  let wake = (): void => undefined;
  let exitedWith: string | undefined;
  const exited = new Promise<void>((resolve) => {
    const done = (why: string): void => {
      exitedWith ??= why;
      process.off("exit", killOnExit);
      wake();
      resolve();
    };
    child.once("exit", (code, signal) => { done(String(code ?? signal)); });
    child.once("error", (error) => { done(error.message); });
  });
  const output = readOutput(child, options.logPath, spawnedAt, () => { wake(); });
  const kill = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
    }
    await exited;
  };

  let serving: Record<string, unknown>;
  try {
    const changed = (ms: number): Promise<void> => new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    serving = await untilReady(options, { name, servingLine: () => output.logged("serving")[0], exitedWith: () => exitedWith, tail: output.tail, changed });
  } catch (error) {
    await kill();
    throw error;
  }
  const client = createCloudProviderClient(String(serving.grpc));
  return {
    name,
    child,
    pid: child.pid ?? 0,
    ...output,
    spawnedAt,
    grpcAddress: String(serving.grpc),
    opsPort: Number(serving.ops),
    client,
    running: () => exitedWith === undefined,
    kill,
    close: async () => {
      await kill();
      client.close();
    },
    stop: async (graceMs = 10_000) => {
      client.close();
      // An IPC channel would keep the process alive after serve() ends.
      if (child.connected) child.disconnect();
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
    freeze: () => {
      if (exitedWith === undefined) child.kill("SIGSTOP");
    },
    thaw: () => {
      if (exitedWith === undefined) child.kill("SIGCONT");
    },
  };
}

type Output = Pick<PlugpoolProcess, "lines" | "startup" | "logged" | "tail">;

/** Reads the child's output as it comes: JSON lines parsed, stderr kept, both appended to `logPath` when given. */
function readOutput(child: ChildProcess, logPath: string | undefined, spawnedAt: number, onLine: () => void): Output {
  const { stdout, stderr } = child;
  if (stdout === null || stderr === null) throw new Error("spawned without pipes");
  const log = logPath === undefined ? undefined : createWriteStream(logPath, { flags: "a" });
  child.once("close", () => log?.end());
  const lines: Record<string, unknown>[] = [];
  const startup: Record<string, number> = {};
  let errors = "";
  stderr.on("data", (d: Buffer) => {
    errors += d.toString();
    log?.write(d);
  });
  createInterface({ input: stdout }).on("line", (text) => {
    log?.write(`${text}\n`);
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    lines.push(line);
    if (typeof line.message === "string") startup[line.message] ??= performance.now() - spawnedAt;
    onLine();
  });
  return {
    lines,
    startup,
    logged: (message, from = 0) => lines.slice(from).filter((l) => l.message === message),
    tail: (count = 40) => `${errors}${lines.slice(-count).map((l) => JSON.stringify(l)).join("\n")}`,
  };
}

/** What the wait for readiness looks at. */
interface Starting {
  readonly name: string;
  servingLine(): Record<string, unknown> | undefined;
  exitedWith(): string | undefined;
  tail(): string;
  /** Resolves at the next log line or exit, or after `ms`. */
  changed(ms: number): Promise<void>;
}

/** Waits for the "serving" line (and /readyz when asked); resolves with that line. */
async function untilReady(options: PlugpoolProcessOptions, starting: Starting): Promise<Record<string, unknown>> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const deadline = performance.now() + timeoutMs;
  const what = options.ready === "readyz" ? "ready" : "serving";
  for (;;) {
    const line = starting.servingLine();
    if (line !== undefined && (options.ready !== "readyz" || (await answersOk(`http://127.0.0.1:${String(line.ops)}/readyz`)))) return line;
    const exited = starting.exitedWith();
    if (exited !== undefined) throw new Error(`${starting.name} exited (${exited}) before ${what}:\n${starting.tail()}`);
    const left = deadline - performance.now();
    if (left < 0) throw new Error(`${starting.name}: not ${what} after ${timeoutMs} ms:\n${starting.tail()}`);
    await starting.changed(Math.min(left, 250));
  }
}
