// The calls the bench makes, as cluster-autoscaler would make them: each benchmarked RPC cycling over the
// site's groups or registered nodes, and one whole CA loop.
import type { CloudProviderClient } from "../tests/harness/grpc-client.ts";
import type { BenchedMethod } from "./baseline.ts";
import type { Probe } from "./latency.ts";
import { PREFIX } from "../tests/harness/site/index.ts";
import type { Layout } from "./layout.ts";

export interface ExternalNode {
  readonly name: string;
  readonly providerID: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** The Nodes CA sees: the registered machines, with the providerID and labels their Nodes carry. */
export function registeredNodes(site: Layout): ExternalNode[] {
  return site.machines
    .filter((m) => m.registered)
    .map((m) => ({ name: m.name, providerID: `${PREFIX}${m.name}`, labels: site.labels(m.group) }));
}

function cycle<T>(items: readonly T[]): () => T {
  let i = 0;
  return () => {
    const item = items[i % items.length];
    i += 1;
    if (item === undefined) throw new Error("nothing to cycle over");
    return item;
  };
}

export function probeFor(client: CloudProviderClient, method: BenchedMethod, site: Layout): Probe {
  const group = cycle(site.groups);
  const node = cycle(registeredNodes(site));
  switch (method) {
    case "nodeGroupNodes":
      return () => client.call("nodeGroupNodes", { id: group() });
    case "nodeGroupForNode":
      return () => {
        const n = node();
        return client.call("nodeGroupForNode", { node: { ...n, labels: { ...n.labels } } });
      };
    case "nodeGroupTargetSize":
      return () => client.call("nodeGroupTargetSize", { id: group() });
    case "nodeGroupTemplateNodeInfo":
      return () => client.call("nodeGroupTemplateNodeInfo", { id: group() });
  }
}

/**
 * One CA loop (RunOnce) after its Refresh, as cluster-autoscaler 1.36's externalgrpc client makes it: its
 * NodeGroups and NodeGroupForNode answers are cached until the next Refresh, so NodeGroups once and
 * NodeGroupForNode once for every Node; then per group TargetSize and Nodes twice (clusterstate's update and
 * the autoscaler's own checks each ask), TemplateNodeInfo once (cached per loop) and GetOptions once
 * (plugpool answers Unimplemented, and CA uses its defaults). Throws on the first unexpected gRPC error: a loop
 * that fails measures nothing. Returns the number of calls made.
 */
export async function caLoopAfterRefresh(client: CloudProviderClient, site: Layout, nodes: readonly ExternalNode[]): Promise<number> {
  let calls = 0;
  const check = (method: string, result: { error?: { message: string; code?: unknown } }, expected?: string): void => {
    calls += 1;
    if (result.error && !(expected !== undefined && result.error.message.includes(expected))) {
      throw new Error(`${method} failed in a CA loop: ${result.error.message}`);
    }
  };
  check("NodeGroups", await client.call("nodeGroups", {}));
  for (const node of nodes) {
    check("NodeGroupForNode", await client.call("nodeGroupForNode", { node: { ...node, labels: { ...node.labels } } }));
  }
  for (const id of site.groups) {
    for (let i = 0; i < 2; i++) {
      check("NodeGroupTargetSize", await client.call("nodeGroupTargetSize", { id }));
      check("NodeGroupNodes", await client.call("nodeGroupNodes", { id }));
    }
    check("NodeGroupTemplateNodeInfo", await client.call("nodeGroupTemplateNodeInfo", { id }));
    check("NodeGroupGetOptions", await client.call("nodeGroupGetOptions", { id, defaults: {} }), "not implemented");
  }
  return calls;
}
