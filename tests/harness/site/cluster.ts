// The cluster side of a test site: a real control plane (tests/harness/control-plane) made ready for plugpool,
// and the identity plugpool and cluster-autoscaler act as.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { apply, createNamespace, exampleManifest } from "../../adapters/kubernetes/support.ts";
import { startControlPlane, type ControlPlane } from "../control-plane/index.ts";

/** plugpool's namespace: its power-off pods, its records and Lease, and cluster-autoscaler's Lease. */
export const NAMESPACE = "plugpool";
/** The example Deployment's ServiceAccount (deploy/examples/rbac.yaml), which plugpool and cluster-autoscaler run as. */
export const SERVICE_ACCOUNT = "cluster-autoscaler";
/** Its token's lifetime: a week, as the sandbox may run that long. */
const TOKEN_SECONDS = 7 * 24 * 3600;

export interface ClusterOptions {
  /**
   * kube-controller-manager and kube-scheduler besides etcd and kube-apiserver (default true): pods are scheduled,
   * ServiceAccounts get made, and a Node without heartbeats goes NotReady.
   */
  readonly controllers?: boolean;
  /**
   * What plugpool finds: "example" (the default), deploy/examples' namespace.yaml and rbac.yaml, and plugpool and
   * cluster-autoscaler act as the example ServiceAccount; "bare", only the namespace (Pod Security privileged, with
   * its default ServiceAccount, which pods need), and they act as the admin.
   */
  readonly setup?: "example" | "bare";
  /** More namespaces, for a workload. */
  readonly namespaces?: readonly string[];
}

export interface Cluster {
  readonly plane: ControlPlane;
  /** The admin (system:masters). */
  readonly admin: KubeConfig;
  readonly core: CoreV1Api;
  /** Who plugpool and cluster-autoscaler act as, and a kubeconfig file of it (removed with the plane). */
  readonly identity: KubeConfig;
  readonly kubeconfigPath: string;
}

/** Starts the control plane and sets it up; stops it again if the set-up fails. */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const controllers = options.controllers ?? true;
  const plane = await startControlPlane({ controllerManager: controllers, scheduler: controllers });
  try {
    const admin = plane.admin();
    const core = admin.makeApiClient(CoreV1Api);
    if (options.setup === "bare") {
      await createNamespace(core, NAMESPACE, { "pod-security.kubernetes.io/enforce": "privileged" });
    } else {
      await apply(admin, [...exampleManifest("namespace.yaml"), ...exampleManifest("rbac.yaml")]);
    }
    for (const name of options.namespaces ?? []) await core.createNamespace({ body: { metadata: { name } } });
    if (options.setup === "bare") return { plane, admin, core, identity: admin, kubeconfigPath: plane.kubeconfigPath };
    const identity = await plane.asServiceAccount(NAMESPACE, SERVICE_ACCOUNT, TOKEN_SECONDS);
    return { plane, admin, core, identity, kubeconfigPath: await plane.kubeconfigFor(identity) };
  } catch (error) {
    await plane.stop();
    throw error;
  }
}
