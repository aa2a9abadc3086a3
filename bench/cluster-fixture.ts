// The cluster side of a bench run: the power-off namespace, Ready Nodes for the registered machines (created
// as admin, no kubelets: nothing heartbeats, and without a controller-manager nothing marks them NotReady),
// and the kubeconfig plugpool uses (through the counting proxy).
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { callOptions } from "../src/adapters/kubernetes/api-errors.ts";
import type { ControlPlane } from "../tests/support/control-plane.ts";

export const NAMESPACE = "plugpool";
const MERGE = callOptions({ contentType: "application/merge-patch+json" });
const PARALLEL = 16;

export async function createNamespace(plane: ControlPlane): Promise<void> {
  const core = plane.admin().makeApiClient(CoreV1Api);
  await core.createNamespace({
    body: { metadata: { name: NAMESPACE, labels: { "pod-security.kubernetes.io/enforce": "privileged" } } },
  });
}

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
