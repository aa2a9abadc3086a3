// `plugpool serve` as its own process, run from the bundle as the image runs it: its JSON log lines kept in
// memory, a wait until it serves, and a gRPC client of it, as cluster-autoscaler beside it would call it. Build
// the bundle first (npm run bundle).
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { createCloudProviderClient, type CloudProviderClient } from "./grpc-client.ts";
import { withHostname } from "./control-plane/process.ts";
import { eventually } from "./eventually.ts";

const bundle = new URL("../../dist/plugpool.mjs", import.meta.url).pathname;

export interface PlugpoolOptions {
  /** Its pod's name (POD_NAME): plugpool's Lease names its holder by it. */
  readonly name: string;
  readonly configPath: string;
  readonly kubeconfigPath: string;
  /** The hostname it runs under, its pod's (see withHostname): cluster-autoscaler's Lease names its holder by it. */
  readonly hostname?: string;
  /** More environment, e.g. POD_NAMESPACE. */
  readonly env?: Readonly<Record<string, string>>;
}

export interface PlugpoolProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Its log lines so far, parsed. */
  readonly lines: Record<string, unknown>[];
  readonly client: CloudProviderClient;
  /** Log lines from index `from` on with this message. */
  logged(message: string, from?: number): Record<string, unknown>[];
  /** The last lines of its log, for failure messages. */
  tail(lines?: number): string;
  /** SIGKILL (a frozen one is woken first, so that it dies); resolves once it has exited. Idempotent. */
  kill(): Promise<void>;
  /** kill(), and the client closed. */
  close(): Promise<void>;
}

/** Starts `plugpool serve --log-level debug`; resolves once it logs that it serves (within 30 s). */
export async function startPlugpoolProcess(options: PlugpoolOptions): Promise<PlugpoolProcess> {
  const args = [bundle, "serve", "--config", options.configPath, "--kubeconfig", options.kubeconfigPath, "--log-level", "debug"];
  const command = options.hostname === undefined ? { binary: process.execPath, args } : withHostname(options.hostname, process.execPath, args);
  const child = spawn(command.binary, command.args, {
    env: { PATH: process.env.PATH ?? "", POD_NAME: options.name, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => { resolve(); });
    child.once("error", () => { resolve(); });
  });
  const lines: Record<string, unknown>[] = [];
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout }).on("line", (line) => {
    lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  const logged = (message: string, from = 0) => lines.slice(from).filter((l) => l.message === message);
  const tail = (count = 40) => `${stderr}${lines.slice(-count).map((l) => JSON.stringify(l)).join("\n")}`;
  const kill = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
    }
    await exited;
  };
  try {
    await eventually(`${options.name} serving`, () => {
      assert.ok(logged("serving").length > 0, tail(Number.POSITIVE_INFINITY));
    }, 30_000);
  } catch (error) {
    await kill();
    throw error;
  }
  const client = createCloudProviderClient(String(logged("serving")[0]?.grpc));
  return {
    name: options.name,
    child,
    lines,
    client,
    logged,
    tail,
    kill,
    close: async () => {
      await kill();
      client.close();
    },
  };
}
