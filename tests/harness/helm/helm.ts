// The helm CLI built by build.sh beside this file, and the official cluster-autoscaler chart that ships
// beside the repository (shared/vendor), for rendering deploy/helm/values.yaml as `helm install` would.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { toolBinaryDir } from "../control-plane/index.ts";

const moduleDir = import.meta.dirname;
/** Where the chart archive ships: `shared/vendor`, beside the repository's folder. */
const vendorDir = join(moduleDir, "..", "..", "..", "..", "shared", "vendor");
/** The chart version deploy/helm/values.yaml is written for. */
export const CHART_VERSION = "9.59.0";

/** Where build.sh puts the binary pinned by the current go.mod and go.sum (whether or not it is built). */
export function helmBinaryPath(): string {
  return join(toolBinaryDir(moduleDir), "helm");
}

/** Where the chart archive is looked for: PLUGPOOL_CHART_ARCHIVE, else shared/vendor beside the repository. */
function chartArchivePath(): string {
  const configured = process.env.PLUGPOOL_CHART_ARCHIVE;
  return configured !== undefined && configured !== "" ? configured : join(vendorDir, `cluster-autoscaler-chart-${CHART_VERSION}.tgz`);
}

/** The chart archive, or undefined when there is none. */
export function chartArchive(): string | undefined {
  const path = chartArchivePath();
  return existsSync(path) ? path : undefined;
}

/** Why the chart cannot be rendered here, or undefined when it can. */
export function chartMissing(): string | undefined {
  if (chartArchive() !== undefined) return undefined;
  return `the cluster-autoscaler chart ${CHART_VERSION} is not at ${chartArchivePath()} (set PLUGPOOL_CHART_ARCHIVE to its .tgz): ` +
    `helm repo add autoscaler https://kubernetes.github.io/autoscaler && helm pull autoscaler/cluster-autoscaler --version ${CHART_VERSION}`;
}

export interface TemplateOptions {
  readonly chart: string;
  readonly release: string;
  readonly namespace: string;
  readonly valuesFiles: readonly string[];
  /** .Capabilities.KubeVersion, e.g. v1.36.5. */
  readonly kubeVersion: string;
}

/** Runs helm with `args` and returns its standard output; throws with its standard error when it fails. */
export async function helm(args: readonly string[]): Promise<string> {
  const binary = helmBinaryPath();
  if (!existsSync(binary)) throw new Error(`helm is not built at ${binary}: run bash tests/harness/helm/build.sh (bash scripts/dev.sh setup does)`);
  // Its own config, cache and data folders, so no user's repositories, plugins or releases take part.
  const home = mkdtempSync(join(tmpdir(), "plugpool-helm-"));
  try {
    const env = { PATH: process.env.PATH ?? "", HOME: home, HELM_CONFIG_HOME: join(home, "config"), HELM_CACHE_HOME: join(home, "cache"), HELM_DATA_HOME: join(home, "data") };
    const { stdout } = await promisify(execFile)(binary, args, { env, maxBuffer: 16 * 1024 * 1024 }).catch((error: unknown) => {
      const { code, stderr } = error as { code?: number; stderr?: string };
      throw new Error(`helm ${args.slice(0, 2).join(" ")} exited ${String(code)}: ${stderr ?? ""}`);
    });
    return stdout;
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** `helm template`'s output: the manifests `helm install` would create, as one multi-document YAML text. */
export async function helmTemplate(options: TemplateOptions): Promise<string> {
  return helm(["template", options.release, options.chart, "--namespace", options.namespace, "--kube-version", options.kubeVersion,
    ...options.valuesFiles.flatMap((f) => ["--values", f])]);
}
