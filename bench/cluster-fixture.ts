// The cluster side of a bench run, on the test site's control plane (tests/harness/site, without controllers):
// Ready Nodes for the registered machines (created as admin, no kubelets: nothing heartbeats, and without a
// controller-manager nothing marks them NotReady), and the kubeconfig plugpool uses (through the counting proxy).
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { callOptions } from "../src/adapters/kubernetes/api-errors.ts";
import type { ControlPlane } from "../tests/harness/control-plane/index.ts";

const MERGE = callOptions({ contentType: "application/merge-patch+json" });
const PARALLEL = 16;

export interface RegisteredNode {
  readonly name: string;
  readonly providerID: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** Creates the Nodes (Ready, with capacity), `PARALLEL` at a time. */
export async function registerNodes(plane: ControlPlane, nodes: readonly RegisteredNode[]): Promise<void> {
  const core = plane.admin().makeApiClient(CoreV1Api);
  const capacity = { cpu: "4", memory: "8Gi", pods: "110" };
  const queue = [...nodes];
  const worker = async (): Promise<void> => {
    for (let node = queue.shift(); node; node = queue.shift()) {
      const now = new Date();
      await core.createNode({ body: { metadata: { name: node.name, labels: { ...node.labels } }, spec: { providerID: node.providerID } } });
      // Node status is a subresource: set apart from the create.
      await core.patchNodeStatus(
        {
          name: node.name,
          body: {
            status: {
              capacity,
              allocatable: capacity,
              conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", lastHeartbeatTime: now, lastTransitionTime: now }],
            },
          },
        },
        MERGE,
      );
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
}

/**
 * Creates `count` Nodes that match no machine, each about the size a kubelet makes one (labels and annotations,
 * its addresses, node info and images in the status, the managedFields the apiserver adds: about 10 KB as JSON),
 * `PARALLEL` at a time. Returns the size of one as the apiserver answers it.
 */
export async function registerForeignNodes(plane: ControlPlane, count: number): Promise<number> {
  const core = plane.admin().makeApiClient(CoreV1Api);
  let sizeBytes = 0;
  const images = Array.from({ length: 40 }, (_, i) => ({
    names: [
      `registry.example.com/team-${i % 7}/service-${i}@sha256:${String(i).padStart(2, "0").repeat(32)}`,
      `registry.example.com/team-${i % 7}/service-${i}:v1.${i}.0`,
    ],
    sizeBytes: 50_000_000 + i * 1_000_003,
  }));
  const labels = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`example.com/label-${i}`, `value-${i}`]));
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      const name = `foreign-${String(i).padStart(5, "0")}`;
      const now = new Date();
      await core.createNode({
        body: {
          metadata: {
            name,
            labels: { ...labels, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64" },
            annotations: { "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
          },
          spec: { providerID: `aws:///eu-west-1a/i-${String(i).padStart(17, "0")}`, podCIDR: `10.${i >> 8}.${i & 255}.0/24` },
        },
      });
      const patched = await core.patchNodeStatus(
        {
          name,
          body: {
            status: {
              capacity: { cpu: "16", memory: "64Gi", pods: "110", "ephemeral-storage": "200Gi" },
              allocatable: { cpu: "15800m", memory: "63Gi", pods: "110", "ephemeral-storage": "190Gi" },
              conditions: ["MemoryPressure", "DiskPressure", "PIDPressure"].map((type) => ({
                type, status: "False", reason: `KubeletHas${type === "PIDPressure" ? "SufficientPID" : `No${type}`}`,
                message: "kubelet has no pressure", lastHeartbeatTime: now, lastTransitionTime: now,
              })).concat([{ type: "Ready", status: "True", reason: "KubeletReady", message: "kubelet is posting ready status", lastHeartbeatTime: now, lastTransitionTime: now }]),
              addresses: [{ type: "InternalIP", address: `10.0.${i >> 8}.${i & 255}` }, { type: "Hostname", address: name }],
              nodeInfo: {
                machineID: "0".repeat(32), systemUUID: "00000000-0000-0000-0000-000000000000", bootID: "0".repeat(32),
                kernelVersion: "6.12.0", osImage: "Debian GNU/Linux 13", containerRuntimeVersion: "containerd://2.1.0",
                kubeletVersion: "v1.36.0", kubeProxyVersion: "", operatingSystem: "linux", architecture: "amd64",
              },
              images,
            },
          },
        },
        MERGE,
      );
      sizeBytes = JSON.stringify(patched).length;
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return sizeBytes;
}

export async function deleteAllNodes(plane: ControlPlane): Promise<void> {
  await plane.admin().makeApiClient(CoreV1Api).deleteCollectionNode();
}

/**
 * A kubeconfig file for plugpool: the admin's token, sent to the counting proxy over plain HTTP on loopback
 * (client-node accepts an http server only with insecure-skip-tls-verify). The file is owner-only and goes
 * with the control plane's directory.
 */
export async function plugpoolKubeconfig(plane: ControlPlane, proxyUrl: string): Promise<string> {
  const admin = plane.admin();
  const user = admin.getCurrentUser();
  if (user?.token === undefined) throw new Error("the admin kubeconfig carries no token");
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "bench", server: proxyUrl, skipTLSVerify: true }],
    users: [{ name: "plugpool", token: user.token }],
    contexts: [{ name: "bench", cluster: "bench", user: "plugpool" }],
    currentContext: "bench",
  });
  return plane.kubeconfigFor(kc);
}

/** The CA certificate (PEM) the admin kubeconfig trusts, for the proxy's upstream connection. */
export function apiserverCa(plane: ControlPlane): string {
  const caData = plane.admin().getCurrentCluster()?.caData;
  if (caData === undefined) throw new Error("the admin kubeconfig carries no CA data");
  return Buffer.from(caData, "base64").toString("utf8");
}
