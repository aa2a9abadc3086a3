// The Nodes that claim a machine, read from the apiserver at the moment of asking rather than from a watch:
// what is checked right before an irreversible act must not be a view that may lag.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { NodeView } from "../../domain/model.ts";
import type { NodeLookup } from "../../domain/ports.ts";
import { callBound, callOptions } from "./api-errors.ts";
import { toNodeView } from "./wire.ts";

/** How long a lookup may take, unless configured otherwise. */
export const DEFAULT_LOOKUP_TIMEOUT_MS = 5_000;

export interface KubernetesNodeLookupOptions {
  /** Longest one lookup may take (default DEFAULT_LOOKUP_TIMEOUT_MS), within the caller's own signal. */
  readonly timeoutMs?: number;
}

export function createKubernetesNodeLookup(kc: KubeConfig, options: KubernetesNodeLookupOptions = {}): NodeLookup {
  const core = kc.makeApiClient(CoreV1Api);
  const timeoutMs = options.timeoutMs ?? DEFAULT_LOOKUP_TIMEOUT_MS;
  return {
    async nodesClaiming(name, providerID, call) {
      const limits = callBound(timeoutMs, call?.signal);
      // One list of every Node, filtered here: the apiserver offers no field selector on spec.providerID for
      // Nodes (only metadata.name and spec.unschedulable, see NodeToSelectableFields in
      // https://github.com/kubernetes/kubernetes/blob/master/pkg/registry/core/node/strategy.go). Without a
      // resourceVersion the list is a consistent read, the most recent state, never an older cached one
      // (https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list).
      let items: readonly unknown[];
      try {
        items = (await core.listNode({}, callOptions({ signal: limits.signal }))).items;
      } catch (error) {
        const claimants = providerID === "" ? `Node "${name}"` : `Node "${name}" and the Nodes with providerID "${providerID}"`;
        throw limits.error(`reading ${claimants}`, error);
      }
      const claiming: NodeView[] = [];
      for (const item of items) {
        const view = toNodeView(item);
        if (view !== undefined && (view.name === name || (providerID !== "" && view.providerID === providerID))) claiming.push(view);
      }
      return claiming;
    },
  };
}
