// Child processes of the test control plane: each logs to its own file and dies with the test
// process, however that ends.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface ManagedProcess {
  readonly name: string;
  readonly logPath: string;
  /** Whether the process is still running. */
  running(): boolean;
  /** The last lines of its log, for error messages. */
  logTail(lines?: number): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. Idempotent. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL at once, as a crash or the OOM killer ends it; resolves once it has exited. */
  kill(): Promise<void>;
  /** SIGSTOP: frozen as a paused VM or a process stuck in the kernel is, its timers and sockets with it. */
  freeze(): void;
  /** SIGCONT after `freeze`. */
  thaw(): void;
}

const liveChildren = new Set<ChildProcess>();
const exitCleanups = new Set<() => void>();
const forwardedSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

// setpriv asks the kernel to SIGKILL the child when this process dies, even by SIGKILL, when no
// exit handler can run. Without it (no util-linux) the exit and signal handlers below still apply.
const deathSignalArgs = ["--pdeathsig", "KILL", "--"];
const hasSetpriv = spawnSync("setpriv", [...deathSignalArgs, "true"]).status === 0;

/** Starts `binary`, appending its stdout and stderr to `logPath`; `env` adds to this process's environment. */
export function startProcess(name: string, binary: string, args: readonly string[], logPath: string, env?: Readonly<Record<string, string>>): ManagedProcess {
  const fd = openSync(logPath, "a");
  let child: ChildProcess;
  const options = { stdio: ["ignore", fd, fd] as ["ignore", number, number], ...(env !== undefined && { env: { ...process.env, ...env } }) };
  try {
    child = hasSetpriv ? spawn("setpriv", [...deathSignalArgs, binary, ...args], options) : spawn(binary, args, options);
  } finally {
    closeSync(fd);
  }
  // The plane's processes must not keep the test process alive; the exit handler ends them.
  child.unref();
  let exited = false;
  liveChildren.add(child);
  const exit = new Promise<void>((resolve) => {
    const done = (): void => {
      exited = true;
      liveChildren.delete(child);
      resolve();
    };
    child.once("exit", done);
    child.once("error", done);
  });

  return {
    name,
    logPath,
    running: () => !exited,
    logTail: (lines = 40) => tailOf(logPath, lines),
    stop: async (graceMs = 5000) => {
      if (exited) return;
      // An unref'd child's exit alone would not keep the event loop alive until it is reported.
      child.ref();
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exit;
      clearTimeout(timer);
    },
    kill: async () => {
      if (exited) return;
      child.ref();
      child.kill("SIGKILL");
      await exit;
    },
    freeze: () => {
      if (!exited) child.kill("SIGSTOP");
    },
    thaw: () => {
      if (!exited) child.kill("SIGCONT");
    },
  };
}

/**
 * The command that runs `binary` with `args` under a hostname of its own: in a new UTS namespace (root only), as
 * the containers of a pod share theirs. `exec` keeps the process's pid, so its signals reach `binary` itself.
 */
export function withHostname(hostname: string, binary: string, args: readonly string[]): { binary: string; args: string[] } {
  return { binary: "unshare", args: ["--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname, binary, ...args] };
}

/**
 * Runs `cleanup` synchronously if the test process exits or is signalled before `unregister` is
 * called; children still alive then are SIGKILLed first.
 */
export function onAbruptExit(cleanup: () => void): () => void {
  if (exitCleanups.size === 0) {
    process.on("exit", runExitCleanups);
    for (const signal of forwardedSignals) process.on(signal, reraise);
  }
  exitCleanups.add(cleanup);
  return () => {
    exitCleanups.delete(cleanup);
    if (exitCleanups.size === 0) removeHandlers();
  };
}

/**
 * Creates a temp dir named `prefix…` that records its owner's pid, after removing those whose owner
 * has died without cleaning up (killed by SIGKILL, which no handler sees).
 */
export function createOwnedTempDir(prefix: string): string {
  const owner = "owner.pid";
  for (const entry of readdirSync(tmpdir())) {
    const path = join(tmpdir(), entry);
    if (!entry.startsWith(prefix)) continue;
    const pid = readPid(join(path, owner));
    if (pid !== undefined && !isAlive(pid)) rmSync(path, { recursive: true, force: true });
  }
  const dir = mkdtempSync(join(tmpdir(), prefix));
  writeFileSync(join(dir, owner), `${process.pid}\n`);
  return dir;
}

function readPid(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined; // a dir still being set up, or not one of ours
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function runExitCleanups(): void {
  for (const child of liveChildren) child.kill("SIGKILL");
  liveChildren.clear();
  for (const cleanup of exitCleanups) cleanup();
  exitCleanups.clear();
}

function removeHandlers(): void {
  process.off("exit", runExitCleanups);
  for (const signal of forwardedSignals) process.off(signal, reraise);
}

// Cleans up, then lets the signal take its default course (the process ends as it would have),
// unless someone else also listens for it and so has taken charge of it.
function reraise(signal: NodeJS.Signals): void {
  runExitCleanups();
  removeHandlers();
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function tailOf(path: string, lines: number): string {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}
