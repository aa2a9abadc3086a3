// Helper processes of the bench (plug fleet, baseline server, floor client): forked with an IPC channel, sent
// one request, they answer one message and run until the channel closes — which also happens when the bench
// dies.
import { fork, type ChildProcess } from "node:child_process";

export interface Child<Reply> {
  readonly pid: number;
  readonly reply: Reply;
  /** For further messages (the floor client's Refreshes). */
  readonly process: ChildProcess;
  /** Disconnects (the child exits on that), SIGKILL after 10 s. */
  readonly close: () => Promise<void>;
}

/** `nodeArgs`: Node.js options for the child, after this process's own; `env`: variables set over this process's. */
export async function forkChild<Reply>(
  modulePath: string,
  request: unknown,
  nodeArgs: readonly string[] = [],
  env: Readonly<Record<string, string>> = {},
): Promise<Child<Reply>> {
  const child = fork(modulePath, [], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    execArgv: [...process.execArgv, ...nodeArgs],
    env: { ...process.env, ...env },
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => { resolve(); }));
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.connected) child.disconnect();
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const reply = await new Promise<Reply>((resolve, reject) => {
      child.once("message", (message) => { resolve(message as Reply); });
      child.once("exit", (code) => { reject(new Error(`${modulePath} exited (${String(code)}) before answering`)); });
      child.send(request as object);
    });
    return { pid: child.pid ?? 0, reply, process: child, close };
  } catch (error) {
    await close();
    throw error;
  }
}
