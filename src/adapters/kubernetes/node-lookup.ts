// The Nodes that claim a machine as of the moment of asking, not as a watch last showed them: what is checked
// right before an irreversible act must not be a view that may lag. The apiserver offers no field selector on
// spec.providerID for Nodes (only metadata.name and spec.unschedulable, see NodeToSelectableFields in
// https://github.com/kubernetes/kubernetes/blob/master/pkg/registry/core/node/strategy.go), and reading every Node
// inside a plug's timeout costs the whole cluster. So a lookup reads the current resourceVersion (a consistent
// list of one Node) and the Node named after the machine, and takes the Nodes claiming it by providerID from the
// watch's cache once that has caught up with that version. A watch that has not caught up in time (a cluster
// whose Nodes rarely change gives it nothing to catch up with) leaves it to a read of every Node, page by page.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { NodeView } from "../../domain/model.ts";
import type { NodeLookup } from "../../domain/ports.ts";
import { callBound, callOptions, statusOf } from "./api-errors.ts";
import { toNodeView } from "./wire.ts";

/** How long a lookup may take, unless configured otherwise. */
export const DEFAULT_LOOKUP_TIMEOUT_MS = 5_000;

/** How long the watch's cache is waited for before every Node is read instead, unless configured otherwise. */
export const DEFAULT_CATCH_UP_MS = 300;

/** Nodes per page when every Node is read. */
const PAGE_SIZE = 500;

/** The Nodes a watch keeps (the cluster view's). */
export interface NodeCache {
  nodes(): Iterable<NodeView>;
  /** Resolves true once the cache is as of `resourceVersion` or later; false when it cannot tell, or `signal` aborts. */
  caughtUp(resourceVersion: string, signal: AbortSignal): Promise<boolean>;
}

export interface KubernetesNodeLookupOptions {
  /** Longest one lookup may take (default DEFAULT_LOOKUP_TIMEOUT_MS), within the caller's own signal. */
  readonly timeoutMs?: number;
  /** The watch's Nodes; without it every lookup reads every Node. */
  readonly cache?: NodeCache;
  /** Longest wait for the cache to catch up (default DEFAULT_CATCH_UP_MS), within the lookup's own time. */
  readonly catchUpMs?: number;
  /** Each lookup that read every Node because the cache had not caught up in time. */
  readonly onFullRead?: () => void;
}

export function createKubernetesNodeLookup(kc: KubeConfig, options: KubernetesNodeLookupOptions = {}): NodeLookup {
  const core = kc.makeApiClient(CoreV1Api);
  const timeoutMs = options.timeoutMs ?? DEFAULT_LOOKUP_TIMEOUT_MS;
  const catchUpMs = options.catchUpMs ?? DEFAULT_CATCH_UP_MS;

  async function named(name: string, signal: AbortSignal): Promise<NodeView | undefined> {
    try {
      return toNodeView(await core.readNode({ name }, callOptions({ signal })));
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  /** Every Node, as one consistent snapshot read in pages (a continued list is served at its first page's version). */
  async function everyNode(signal: AbortSignal): Promise<NodeView[]> {
    const all: NodeView[] = [];
    let next: string | undefined;
    do {
      const page = await core.listNode({ limit: PAGE_SIZE, ...(next === undefined ? {} : { _continue: next }) }, callOptions({ signal }));
      for (const item of page.items) {
        const view = toNodeView(item);
        if (view !== undefined) all.push(view);
      }
      next = page.metadata?._continue === "" ? undefined : page.metadata?._continue;
    } while (next !== undefined);
    return all;
  }

  async function claiming(name: string, providerID: string, signal: AbortSignal): Promise<NodeView[]> {
    if (providerID === "") {
      const node = await named(name, signal);
      return node === undefined ? [] : [node];
    }
    // A list without a resourceVersion is a consistent read: its version is the apiserver's current one, taken
    // after the caller's wait for the device (https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list).
    const [current, byName] = await Promise.all([core.listNode({ limit: 1 }, callOptions({ signal })), named(name, signal)]);
    const cache = options.cache;
    const waited = AbortSignal.any([signal, AbortSignal.timeout(catchUpMs)]);
    if (cache !== undefined && (await cache.caughtUp(current.metadata?.resourceVersion ?? "", waited))) {
      const byID = [...cache.nodes()].filter((n) => n.providerID === providerID && n.name !== name);
      return byName === undefined ? byID : [byName, ...byID];
    }
    signal.throwIfAborted();
    options.onFullRead?.();
    return (await everyNode(signal)).filter((n) => n.name === name || n.providerID === providerID);
  }

  return {
    async viewCaughtUp(call) {
      const cache = options.cache;
      if (cache === undefined) return;
      const { signal } = callBound(catchUpMs, call?.signal);
      try {
        const current = await core.listNode({ limit: 1 }, callOptions({ signal }));
        await cache.caughtUp(current.metadata?.resourceVersion ?? "", signal);
      } catch {
        // Given up: the view answers as it is.
      }
    },
    async nodesClaiming(name, providerID, call) {
      const limits = callBound(timeoutMs, call?.signal);
      try {
        return await claiming(name, providerID, limits.signal);
      } catch (error) {
        const claimants = providerID === "" ? `Node "${name}"` : `Node "${name}" and the Nodes with providerID "${providerID}"`;
        throw limits.error(`reading ${claimants}`, error);
      }
    },
  };
}
