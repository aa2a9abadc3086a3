// The real cluster-autoscaler as the end-to-end suite and the sandbox run it, with plugpool as its externalgrpc
// cloud provider: the example Deployment's flags, with timings shortened for a tiny test cluster, its own folder for the cloud-config and the log, and a
// wait until it serves. The binary and the connection flags come from tests/harness/autoscaler/autoscaler.ts.
import { readFileSync, rmSync } from "node:fs";
import type { V1ConfigMap, V1Deployment } from "@kubernetes/client-node";
import { exampleManifest } from "../../adapters/kubernetes/support.ts";
import { autoscalerNotBuilt, startAutoscaler as startAutoscalerBinary, type AutoscalerBuild, type RunningAutoscaler } from "./autoscaler.ts";
import { createOwnedTempDir, onAbruptExit } from "../control-plane/process.ts";
import { answersOk, waitUntilReady } from "../control-plane/readiness.ts";

/** The example Deployment's cluster-autoscaler container: its flags by name, and its cloud-config's grpc_timeout. */
function exampleDeployment(): { flags: Record<string, string>; grpcTimeout: string } {
  const [deployment] = exampleManifest("deployment.yaml") as V1Deployment[];
  const container = deployment?.spec?.template.spec?.containers.find((c) => c.name === "cluster-autoscaler");
  if (container?.args === undefined) throw new Error("deploy/examples/deployment.yaml has no cluster-autoscaler container args");
  const flags: Record<string, string> = {};
  for (const arg of container.args) {
    const match = /^--([^=]+)=(.*)$/.exec(arg);
    if (match?.[1] === undefined || match[2] === undefined) throw new Error(`unexpected cluster-autoscaler arg ${arg}`);
    flags[match[1]] = match[2];
  }
  // The test writes its own cloud-config (plugpool's port differs per run).
  delete flags["cloud-config"];
  const [cloudConfig] = exampleManifest("cloud-config.yaml") as V1ConfigMap[];
  const timeout = /grpc_timeout:\s*(\S+)/.exec(cloudConfig?.data?.["cloud-config"] ?? "")?.[1];
  if (timeout === undefined) throw new Error("deploy/examples/cloud-config.yaml sets no grpc_timeout");
  return { flags, grpcTimeout: timeout };
}

const example = exampleDeployment();

/**
 * What the end-to-end suite changes in the example Deployment's flags, for a cluster of a few machines that
 * boot in seconds. Everything else runs as deploy/examples/deployment.yaml says.
 */
export const SPEED_OVERRIDES: Readonly<Record<string, string>> = {
  // A loop every 2 s (default 10 s). An unschedulable pod, or a scale-up, starts a loop at once anyway.
  "scan-interval": "2s",
  // An empty node is removed after 5 s unneeded (example: 30m).
  "scale-down-unneeded-time": "5s",
  // Scale-down is considered 5 s after a scale-up (default 10m) ...
  "scale-down-delay-after-add": "5s",
  // ... and 5 s after a failed one (default 3m).
  "scale-down-delay-after-failure": "5s",
  // A node found unremovable (say, it still ran a pod) is looked at again after 5 s, not 5 min: otherwise
  // deleting the last pod leaves the node up for minutes.
  "unremovable-node-recheck-timeout": "5s",
  // Between CA's ToBeDeleted taint and its DeleteNodes call (default 5 s).
  "node-delete-delay-after-taint": "1s",
  // A switched-on machine has 60 s to register its Node (example: 15m); then CA gives the scale-up up.
  "max-node-provision-time": "60s",
  // A registered node NotReady this long counts as unneeded (default 20m).
  "scale-down-unready-time": "1m",
  // Pods with emptyDir volumes do not pin a node (sandbox users' pods often have one).
  "skip-nodes-with-local-storage": "false",
};

/**
 * cluster-autoscaler's flags in the end-to-end suite: the example Deployment's, with SPEED_OVERRIDES;
 * `AutoscalerOptions.flags` overrides one by name. Besides these, CA always gets --cloud-config, --kubeconfig
 * and a loopback --address (tests/harness/autoscaler/autoscaler.ts).
 */
export const AUTOSCALER_FLAGS: Readonly<Record<string, string>> = { ...example.flags, ...SPEED_OVERRIDES };

export interface AutoscalerOptions {
  /** Which binary (default: the release). */
  readonly build?: AutoscalerBuild;
  /** kubeconfig file of the identity CA acts as. */
  readonly kubeconfigPath: string;
  /** plugpool's gRPC address, host:port. */
  readonly grpcAddress: string;
  /** CA's per-RPC deadline (default: the example cloud-config's grpc_timeout). */
  readonly grpcTimeout?: string;
  /** Flags that replace or add to AUTOSCALER_FLAGS, by name (without the dashes). */
  readonly flags?: Readonly<Record<string, string>>;
  /** The hostname it runs under (tests/harness/autoscaler/autoscaler.ts), its identity when it elects a leader. */
  readonly hostname?: string;
}

export interface AutoscalerProcess {
  readonly logPath: string;
  /** http://127.0.0.1:<port>: /metrics and /health-check. */
  readonly metricsUrl: string;
  running(): boolean;
  /** Its whole log so far. */
  log(): string;
  /** The last lines of its log, for failure messages. */
  logTail(lines?: number): string;
  /** SIGTERM (CA then sends Cleanup), SIGKILL after 10 s; removes its files. Idempotent. */
  stop(): Promise<void>;
}

/** The real cluster-autoscaler's process, which can also die. */
export interface KillableAutoscaler extends AutoscalerProcess {
  /** SIGKILL, as a crash ends it: no Cleanup, and its Lease is not given up. Its files stay until stop(). */
  kill(): Promise<void>;
}

/** Starts cluster-autoscaler; resolves once its health endpoint answers. */
export async function startAutoscaler(options: AutoscalerOptions): Promise<KillableAutoscaler> {
  const missing = autoscalerNotBuilt(options.build);
  if (missing !== undefined) throw new Error(missing);
  const dir = createOwnedTempDir("plugpool-autoscaler-");
  const unregister = onAbruptExit(() => { rmSync(dir, { recursive: true, force: true }); });
  const flags = { ...AUTOSCALER_FLAGS, ...options.flags };
  let started: RunningAutoscaler | undefined;
  const stop = async (): Promise<void> => {
    await started?.process.stop(10_000);
    rmSync(dir, { recursive: true, force: true });
    unregister();
  };
  try {
    started = await startAutoscalerBinary({
      ...(options.build !== undefined && { build: options.build }),
      kubeconfigPath: options.kubeconfigPath,
      grpcAddress: options.grpcAddress,
      dir,
      grpcTimeout: options.grpcTimeout ?? example.grpcTimeout,
      ...(options.hostname !== undefined && { hostname: options.hostname }),
      ...(flags.namespace !== undefined && { namespace: flags.namespace }),
      ...(flags["scan-interval"] !== undefined && { scanInterval: flags["scan-interval"] }),
      // After the connection flags, so these win where both name one.
      extraArgs: Object.entries(flags).map(([name, value]) => `--${name}=${value}`),
    });
    const { process: child, metricsUrl } = started;
    await waitUntilReady(child, "/health-check", () => answersOk(`${metricsUrl}/health-check`), 60_000);
  } catch (error) {
    await stop();
    throw error;
  }
  const { process: child, metricsUrl } = started;
  let stopped: Promise<void> | undefined;
  return {
    logPath: child.logPath,
    metricsUrl,
    running: () => child.running(),
    log: () => readLog(child.logPath),
    logTail: (lines = 60) => child.logTail(lines),
    stop: () => (stopped ??= stop()),
    kill: () => child.kill(),
  };
}

function readLog(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
