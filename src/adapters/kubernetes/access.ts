// Every kind of request plugpool's Kubernetes adapters make, as authorization attributes: what its
// ServiceAccount must be allowed, kept beside the code that makes the requests.
import { POWER_RECORDS_CONFIGMAP } from "./power-records.ts";
import { TEMPLATE_SLICES_CONFIGMAP } from "./template-slices.ts";

export interface Access {
  readonly verb: string;
  readonly resource: string;
  readonly group?: string;
  /** Absent: cluster-wide. */
  readonly namespace?: string;
  /** Absent: any object; a rule limited by resourceNames grants only the named one. */
  readonly name?: string;
}

/** The Leases plugpool's leader election uses: its own (in the power-off namespace) and the one it follows. */
export interface LeaseAccess {
  /** plugpool's own Lease, in `namespace`. */
  readonly lease: string;
  /** cluster-autoscaler's Lease, read only; absent when plugpool does not follow it. */
  readonly autoscaler?: { readonly namespace: string; readonly name: string };
}

/** The defaults: plugpool's Lease, and cluster-autoscaler's default one in the same namespace. */
function defaultLeases(namespace: string): LeaseAccess {
  return { lease: "plugpool", autoscaler: { namespace, name: "cluster-autoscaler" } };
}

/** What plugpool needs, with its power-off pods, ConfigMaps and Lease in `namespace`. */
export function requiredAccess(namespace: string, leases: LeaseAccess = defaultLeases(namespace)): Access[] {
  const each = (verbs: readonly string[], rest: Omit<Access, "verb">): Access[] => verbs.map((verb) => ({ verb, ...rest }));
  return [
    // Watched; patched (power-off record) and deleted after a power-off; listed by the node lookup.
    ...each(["get", "list", "watch", "patch", "delete"], { resource: "nodes" }),
    ...each(["list", "watch"], { resource: "resourceslices", group: "resource.k8s.io" }),
    // Node Events live in `default`.
    ...each(["create", "patch"], { resource: "events", namespace: "default" }),
    ...each(["create", "get", "list", "watch", "delete"], { resource: "pods", namespace }),
    // Either ConfigMap is created by its first write.
    { verb: "create", resource: "configmaps", namespace },
    ...each(["list", "watch", "patch"], { resource: "configmaps", namespace, name: TEMPLATE_SLICES_CONFIGMAP }),
    ...each(["get", "patch"], { resource: "configmaps", namespace, name: POWER_RECORDS_CONFIGMAP }),
    // The leader Lease: created by the first instance, then read and renewed by whichever holds it.
    { verb: "create", resource: "leases", group: "coordination.k8s.io", namespace },
    ...each(["get", "update"], { resource: "leases", group: "coordination.k8s.io", namespace, name: leases.lease }),
    ...(leases.autoscaler === undefined ? [] : [{ verb: "get", resource: "leases", group: "coordination.k8s.io", ...leases.autoscaler }]),
  ];
}
