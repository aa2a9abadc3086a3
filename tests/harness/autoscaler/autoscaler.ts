// The real cluster-autoscaler for cluster-facing tests: a binary built by build.sh beside this
// file, started with the externalgrpc cloud provider against a kubeconfig and a gRPC address.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { toolBinaryDir } from "../control-plane/index.ts";
import { startProcess, withHostname, type ManagedProcess } from "../control-plane/process.ts";
import { freePorts } from "../control-plane/readiness.ts";

const moduleDir = import.meta.dirname;
/** Where the cut-down cluster-autoscaler source ships: `shared/vendor`, beside the repository's folder. */
const vendorDir = join(moduleDir, "..", "..", "..", "..", "shared", "vendor");
const archiveName = /^cluster-autoscaler-.+-externalgrpc-src\.tar\.gz$/;

/**
 * Which cluster-autoscaler: the release go.mod pins, or the same with dra-template.patch applied, which reads the
 * DRA ResourceSlices that a provider sends with a template (https://github.com/kubernetes/autoscaler/pull/10303).
 */
export type AutoscalerBuild = "release" | "dra-template";

/**
 * Where build.sh puts the binary pinned by the current go.mod and go.sum (whether or not it is built); the patched
 * one is named for the patch's hash, as build.sh names it.
 */
export function autoscalerBinaryPath(build: AutoscalerBuild = "release"): string {
  const name = build === "release"
    ? "cluster-autoscaler"
    : `cluster-autoscaler-dra-${createHash("sha256").update(readFileSync(join(moduleDir, "dra-template.patch"))).digest("hex").slice(0, 16)}`;
  return join(toolBinaryDir(moduleDir), name);
}

/**
 * The cluster-autoscaler source archive build.sh builds from, when there is one: PLUGPOOL_AUTOSCALER_ARCHIVE,
 * else the one in shared/vendor beside the repository.
 */
export function autoscalerArchive(): string | undefined {
  const configured = process.env.PLUGPOOL_AUTOSCALER_ARCHIVE;
  if (configured !== undefined && configured !== "") return existsSync(configured) ? configured : undefined;
  let entries: string[];
  try {
    entries = readdirSync(vendorDir);
  } catch {
    return undefined;
  }
  const found = entries.filter((e) => archiveName.test(e)).sort().at(-1);
  return found === undefined ? undefined : join(vendorDir, found);
}

/** Undefined when the binary is there; otherwise why not, and how to build it. */
export function autoscalerNotBuilt(build: AutoscalerBuild = "release"): string | undefined {
  const path = autoscalerBinaryPath(build);
  if (existsSync(path)) return undefined;
  const archive = autoscalerArchive();
  return archive !== undefined
    ? `cluster-autoscaler (${build}) is not built at ${path}, although its source ships at ${archive}: ` +
        "build it with bash tests/harness/autoscaler/build.sh (bash scripts/dev.sh setup does)"
    : `cluster-autoscaler (${build}) is not built at ${path}: the Go module proxy refuses its module and no source archive ` +
        `ships in ${vendorDir}, so build it from a clone of kubernetes/autoscaler with ` +
        "PLUGPOOL_AUTOSCALER_GIT=<clone> bash tests/harness/autoscaler/build.sh";
}

/**
 * Why the tests with the real cluster-autoscaler are skipped here, or undefined when they run. They are
 * skipped only where the binary cannot be built: where its source archive ships, a missing binary is a
 * failure of those tests (startAutoscaler says why), never a skip.
 */
export function autoscalerMissing(build: AutoscalerBuild = "release"): string | undefined {
  return autoscalerArchive() === undefined ? autoscalerNotBuilt(build) : undefined;
}

export interface AutoscalerOptions {
  /** Which binary (default: the release). */
  readonly build?: AutoscalerBuild;
  /** A kubeconfig whose identity may read the cluster and write in `namespace` (status ConfigMap). */
  readonly kubeconfigPath: string;
  /** host:port of the externalgrpc server; plaintext h2c, as with no `cert` in the cloud-config. */
  readonly grpcAddress: string;
  /** Folder for the cloud-config and the log; the caller removes it. */
  readonly dir: string;
  /** How often CA runs its loop (--scan-interval); default 1s, so tests see loops quickly. */
  readonly scanInterval?: string;
  /** Where CA keeps its status ConfigMap (--namespace); default kube-system. */
  readonly namespace?: string;
  /** Per-RPC deadline in the cloud-config (grpc_timeout); default CA's own (5s). */
  readonly grpcTimeout?: string;
  /** Further flags, e.g. --scale-down-unneeded-time=10s; a later flag overrides an earlier one. */
  readonly extraArgs?: readonly string[];
  /**
   * The hostname CA sees, in a UTS namespace of its own: with --leader-elect, CA names its Lease's holder by it, so
   * two CAs on one machine need two.
   */
  readonly hostname?: string;
}

export interface RunningAutoscaler {
  readonly process: ManagedProcess;
  /** http://127.0.0.1:<port>: /metrics and /health-check. */
  readonly metricsUrl: string;
  /** The flags CA was started with, for error messages. */
  readonly args: readonly string[];
}

/**
 * Starts cluster-autoscaler; it returns at once, since CA has no readiness endpoint worth
 * polling: wait for its first Refresh on the gRPC server instead. Stopping it (SIGTERM) makes CA
 * delete its status ConfigMap and call Cleanup.
 */
export async function startAutoscaler(options: AutoscalerOptions): Promise<RunningAutoscaler> {
  const missing = autoscalerNotBuilt(options.build);
  if (missing !== undefined) throw new Error(missing);
  const cloudConfig = join(options.dir, "cloud-config.yaml");
  const lines = [`address: "${options.grpcAddress}"`];
  if (options.grpcTimeout !== undefined) lines.push(`grpc_timeout: "${options.grpcTimeout}"`);
  writeFileSync(cloudConfig, lines.join("\n") + "\n");
  const { metrics } = await freePorts(["metrics"]);
  const args = [
    "--cloud-provider=externalgrpc",
    `--cloud-config=${cloudConfig}`,
    `--kubeconfig=${options.kubeconfigPath}`,
    `--namespace=${options.namespace ?? "kube-system"}`,
    // A single instance: no Lease to win first, so the loop starts at once.
    "--leader-elect=false",
    `--scan-interval=${options.scanInterval ?? "1s"}`,
    // Metrics and health-check listen on all interfaces by default (:8085); loopback only here.
    `--address=127.0.0.1:${metrics}`,
    "--v=2",
    ...(options.extraArgs ?? []),
  ];
  const binary = autoscalerBinaryPath(options.build);
  const command = options.hostname === undefined ? { binary, args } : withHostname(options.hostname, binary, args);
  const child = startProcess("cluster-autoscaler", command.binary, command.args, join(options.dir, "cluster-autoscaler.log"));
  return { process: child, metricsUrl: `http://127.0.0.1:${metrics}`, args };
}
