// What a new machine of a group would look like: the template Node, and the DRA slices of the
// first machine that has published some, renamed to the template node.
import type { DeviceAttribute, DeviceSlice, Machine, NodeGroupSpec, TemplateNode } from "./model.ts";
import type { PoolContext } from "./context.ts";

/** The name of a group's template node. */
export function templateNodeName(groupId: string): string {
  return `template-node-for-${groupId}`;
}

/** The architecture and OS a template claims unless its labels say otherwise. */
const DEFAULT_TEMPLATE_LABELS: Readonly<Record<string, string>> = {
  "kubernetes.io/arch": "amd64",
  "kubernetes.io/os": "linux",
};

/**
 * The template Node of a group: template labels over the well-known ones, capacity = allocatable (cpu, memory,
 * pods and further resources), template taints, Ready and no pressure. cluster-autoscaler adds no arch or os
 * label to a provider's template (it only sets the hostname:
 * https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/simulator/node_info_utils.go),
 * and many charts select on them: without them no such pod scales a group up from zero. The deprecated
 * beta.kubernetes.io/arch and /os, which kubelets still set, are not added (cluster-autoscaler reads neither):
 * a group whose pods still select on them names them in its labels.
 */
export function templateNode(group: NodeGroupSpec): TemplateNode {
  const name = templateNodeName(group.id);
  const t = group.template;
  const resources = { cpu: t.cpu, memory: t.memory, pods: t.pods, ...t.resources };
  return {
    name,
    labels: {
      ...DEFAULT_TEMPLATE_LABELS,
      "kubernetes.io/hostname": name,
      "node.kubernetes.io/instance-type": `plugpool.${group.id}`,
      ...t.labels,
    },
    capacity: resources,
    allocatable: resources,
    taints: t.taints,
    conditions: [
      { type: "Ready", status: "True", reason: "KubeletReady" },
      { type: "MemoryPressure", status: "False", reason: "KubeletHasSufficientMemory" },
      { type: "DiskPressure", status: "False", reason: "KubeletHasNoDiskPressure" },
      { type: "PIDPressure", status: "False", reason: "KubeletHasSufficientPID" },
      { type: "NetworkUnavailable", status: "False", reason: "RouteCreated" },
    ],
  };
}

/** Source of group templates; remembers which slice differences it has reported. */
export type TemplateSource = (group: NodeGroupSpec) => { readonly node: TemplateNode; readonly slices: readonly DeviceSlice[] };

/**
 * Templates with DRA slices: those of the first machine in config order that has a non-empty snapshot,
 * made node-local to the template node (nodeName, pool names containing the machine name, consistent
 * resourceSliceCount). Reports `template-slices-differ`, once per change, when machines of one group publish
 * different devices.
 */
export function createTemplateSource(ctx: PoolContext): TemplateSource {
  const noted = new Map<string, string>();
  return (group) => {
    const node = templateNode(group);
    const published = group.machines.flatMap((m) => {
      const slices = ctx.deps.cluster.templateSlices(m.name);
      return slices === undefined || slices.length === 0 ? [] : [{ machine: m, slices }];
    });
    const first = published[0];
    if (first === undefined) {
      noted.delete(group.id);
      return { node, slices: [] };
    }
    const reference = deviceSignature(first.slices);
    const differing = published.filter((p) => deviceSignature(p.slices) !== reference).map((p) => p.machine.name);
    const note = differing.length === 0 ? "" : `${first.machine.name}|${differing.join(",")}|${reference}`;
    if (note !== "" && noted.get(group.id) !== note) {
      ctx.deps.reporter.report({
        type: "template-slices-differ",
        group: group.id,
        machine: first.machine.name,
        differing,
        detail: `the template uses the devices of ${first.machine.name}; ${differing.join(", ")} publish other devices`,
      });
    }
    noted.set(group.id, note);
    return { node, slices: renameSlices(first.machine, first.slices, node.name) };
  };
}

function renameSlices(machine: Machine, slices: readonly DeviceSlice[], nodeName: string): DeviceSlice[] {
  const poolName = (s: DeviceSlice): string => s.pool.name.replaceAll(machine.name, nodeName);
  return slices.map((s) => ({
    ...s,
    nodeName,
    pool: {
      ...s.pool,
      name: poolName(s),
      resourceSliceCount: slices.filter((o) => o.driver === s.driver && poolName(o) === poolName(s)).length,
    },
  }));
}

/** Drivers, device names and attributes of a set of slices, in a canonical order. */
function deviceSignature(slices: readonly DeviceSlice[]): string {
  return slices
    .flatMap((s) => s.devices.map((d) => `${s.driver}/${d.name}{${attributesSignature(d.attributes)}}`))
    .toSorted()
    .join("\n");
}

function attributesSignature(attributes: Readonly<Record<string, DeviceAttribute>>): string {
  return Object.keys(attributes)
    .toSorted()
    .map((k) => `${k}=${JSON.stringify(attributes[k])}`)
    .join(",");
}
