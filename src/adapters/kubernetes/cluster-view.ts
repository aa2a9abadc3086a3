// The cluster as plugpool needs it, kept in memory by watches (never polled): Nodes,
// plugpool's power-off pods, and the DRA devices of each machine. Every ClusterView answer comes from
// memory, so once synced a cluster-autoscaler call costs no request at all (stats() counts them). The view
// counts as current only while every watch keeps hearing from the apiserver.
import { CoreV1Api, Watch, type KubeConfig } from "@kubernetes/client-node";
import type { ClusterView } from "../../domain/ports.ts";
import type { DeviceSlice, Machine, NodeView, PowerOffPodView } from "../../domain/model.ts";
import { callOptions, DEFAULT_WRITE_TIMEOUT_MS } from "./api-errors.ts";
import { createReflector, defaultRetry, type Reflector, type ReflectorDeps, type RequestStats, type RetrySettings } from "./reflector.ts";
import { POWER_OFF_POD_SELECTOR, toPowerOffPodView } from "./power-off-pod.ts";
import { createTemplateSlices } from "./template-slices.ts";
import type { NodeCache } from "./node-lookup.ts";
import { toNodeView } from "./wire.ts";

/**
 * How long after its last contact with the apiserver a watch still counts as current. client-node ends a watch
 * that has been quiet for 30 s and it is started again at once, so a healthy watch hears from the apiserver at
 * least that often.
 */
export const DEFAULT_CONTACT_BOUND_MS = 60_000;

export interface KubernetesClusterViewOptions {
  /** Where plugpool's power-off pods and its template-slices ConfigMap live. */
  readonly powerOffNamespace: string;
  readonly machines: readonly Machine[];
  /** Backoff between attempts after a failed list or watch (default 0.5 s doubling to 30 s). */
  readonly retry?: RetrySettings;
  /** Every failed list, watch or ConfigMap write; the view retries by itself. */
  readonly onError?: (error: unknown) => void;
  /** Writes nothing: the template slices seen are kept in memory only, not stored in their ConfigMap. */
  readonly readOnly?: boolean;
  /** Longest a ConfigMap write may take (default DEFAULT_WRITE_TIMEOUT_MS). */
  readonly writeTimeoutMs?: number;
  /** How recent every watch's last contact must be for the view to be current (default DEFAULT_CONTACT_BOUND_MS). */
  readonly contactBoundMs?: number;
  /** Epoch ms (default Date.now). */
  readonly now?: () => number;
}

export interface ClusterViewHealth {
  /** As current(). */
  readonly current: boolean;
  /** As synced(). */
  readonly synced: boolean;
  /** Epoch ms of the least recent last contact among the watches; undefined until each has had one. */
  readonly lastContactAt: number | undefined;
}

export interface KubernetesClusterView extends ClusterView {
  /** Starts the watches. Answers are empty until synced. */
  start(): void;
  /** Every watched collection has been listed once. Stays true while the apiserver is away: see current(). */
  synced(): boolean;
  /** For readiness and metrics. */
  health(): ClusterViewHealth;
  /** Resolves once synced; rejects if `signal` aborts first. */
  whenSynced(signal?: AbortSignal): Promise<void>;
  /** Calls `listener` after each change to a Node or a power-off pod. Returns the unsubscribe function. */
  onChange(listener: () => void): () => void;
  /** The Node's uid, for Events that refer to it. */
  nodeUid(name: string): string | undefined;
  /** The Nodes as the watch has them, for the node lookup to answer from once it has caught up. */
  readonly nodeCache: NodeCache;
  /** Resolves once the template slices seen so far are stored in their ConfigMap. */
  templateSlicesStored(): Promise<void>;
  /**
   * Requests made so far: list requests (one a page) and watch starts. A quiet watch is renewed every 30 s (client-node's
   * idle timeout) from the last resourceVersion, without a list.
   */
  stats(): RequestStats;
  /** Stops the watches and pending ConfigMap writes; a stopped view is not started again. */
  stop(): Promise<void>;
}

export function createKubernetesClusterView(kc: KubeConfig, options: KubernetesClusterViewOptions): KubernetesClusterView {
  const core = kc.makeApiClient(CoreV1Api);
  const stats: RequestStats = { lists: 0, watches: 0 };
  const now = options.now ?? Date.now;
  const deps = { watch: new Watch(kc), stats, retry: options.retry ?? defaultRetry, onError: options.onError ?? (() => undefined), now };
  const listeners = new Set<() => void>();
  // Called by the watches, so only once started: `freshness`, built from them below, is there by then.
  const changed = (): void => {
    for (const listener of listeners) {
      try {
        listener();
      } catch (error) {
        deps.onError(error);
      }
    }
    freshness.settle();
  };

  const nodes = createNodeReads(core, { ...deps, onChange: changed });
  const namespace = options.powerOffNamespace;
  const pods = createPowerOffPodReads(core, namespace, { ...deps, onChange: changed });
  const templates = createTemplateSlices(
    kc,
    {
      namespace,
      machines: options.machines.map((m) => m.name),
      writeTimeoutMs: options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS,
      ...(options.readOnly === true && { readOnly: true }),
    },
    { ...deps, onChange: () => { freshness.settle(); } },
  );
  const reflectors: readonly Reflector<unknown>[] = [nodes.reflector, pods.reflector, ...templates.reflectors];
  const freshness = createFreshness(reflectors, now, options.contactBoundMs ?? DEFAULT_CONTACT_BOUND_MS);

  return {
    ...nodes.reads,
    ...pods.reads,
    templateSlices: (machine): readonly DeviceSlice[] | undefined => templates.get(machine),

    start() {
      for (const reflector of reflectors) reflector.start();
    },
    ...freshness.reads,
    onChange(listener) {
      const own = (): void => { listener(); };
      listeners.add(own);
      return () => { listeners.delete(own); };
    },
    templateSlicesStored: () => templates.flushed(),
    stats: () => ({ ...stats }),
    async stop() {
      templates.stop();
      await Promise.all(reflectors.map((r) => r.stop()));
    },
  };
}

type NodeReads = Pick<KubernetesClusterView, "nodeNamed" | "nodesWithProviderID" | "nodesCreatedAfter" | "nodeUid" | "nodeCache">;

/** The Nodes watch and the view's answers from it, by name and by providerID. */
function createNodeReads(core: CoreV1Api, deps: ReflectorDeps): { readonly reflector: Reflector<NodeView>; readonly reads: NodeReads } {
  // Built on the first ask after a change to the Nodes.
  let byProviderID: Map<string, NodeView[]> | undefined;
  const reflector = createReflector(
    { path: "/api/v1/nodes", list: (page, signal) => core.listNode(page, callOptions({ signal })), convert: toNodeView },
    { ...deps, onChange: () => { byProviderID = undefined; deps.onChange(); } },
  );
  const reads: NodeReads = {
    nodeNamed: (name) => reflector.items.get(name),
    nodesWithProviderID(providerID) {
      if (providerID === "") return [];
      byProviderID ??= indexByProviderID(reflector.items.values());
      return byProviderID.get(providerID) ?? [];
    },
    nodesCreatedAfter(at) {
      // A scan of memory, asked only right before a cut of a machine without a Node.
      const created: NodeView[] = [];
      for (const view of reflector.items.values()) if (view.createdAt === undefined || view.createdAt > at) created.push(view);
      return created;
    },
    nodeUid: (name) => reflector.items.get(name)?.uid,
    nodeCache: { nodes: () => reflector.items.values(), caughtUp: (resourceVersion, signal) => reflector.caughtUp(resourceVersion, signal) },
  };
  return { reflector, reads };
}

function indexByProviderID(nodes: Iterable<NodeView>): Map<string, NodeView[]> {
  const byProviderID = new Map<string, NodeView[]>();
  for (const view of nodes) {
    const claiming = byProviderID.get(view.providerID);
    if (claiming === undefined) byProviderID.set(view.providerID, [view]);
    else claiming.push(view);
  }
  return byProviderID;
}

/** The watch of plugpool's power-off pods in their namespace, and the view's answer from it. */
function createPowerOffPodReads(
  core: CoreV1Api,
  namespace: string,
  deps: ReflectorDeps,
): { readonly reflector: Reflector<PowerOffPodView>; readonly reads: Pick<KubernetesClusterView, "powerOffPod"> } {
  const reflector = createReflector<PowerOffPodView>(
    {
      path: `/api/v1/namespaces/${namespace}/pods`,
      labelSelector: POWER_OFF_POD_SELECTOR,
      list: (page, signal) => core.listNamespacedPod({ namespace, labelSelector: POWER_OFF_POD_SELECTOR, ...page }, callOptions({ signal })),
      convert: toPowerOffPodView,
    },
    deps,
  );
  const reads: Pick<KubernetesClusterView, "powerOffPod"> = {
    powerOffPod(machine) {
      for (const pod of reflector.items.values()) if (pod.machine === machine) return pod;
      return undefined;
    },
  };
  return { reflector, reads };
}

interface Freshness {
  readonly reads: Pick<KubernetesClusterView, "current" | "synced" | "health" | "whenSynced">;
  /** Resolves whoever waits in whenSynced() once synced; called after every change to any collection. */
  settle(): void;
}

/** Whether every watch has listed once and heard from the apiserver lately, and the waits for the first. */
function createFreshness(reflectors: readonly Reflector<unknown>[], now: () => number, contactBoundMs: number): Freshness {
  const waiters = new Set<() => void>();
  const synced = (): boolean => reflectors.every((r) => r.synced());
  const health = (): ClusterViewHealth => {
    const contacts = reflectors.map((r) => r.lastContact());
    const lastContactAt = contacts.every((c) => c !== undefined) ? Math.min(...contacts) : undefined;
    const isSynced = synced();
    return { current: isSynced && lastContactAt !== undefined && now() - lastContactAt <= contactBoundMs, synced: isSynced, lastContactAt };
  };
  const whenSynced = (signal?: AbortSignal): Promise<void> => {
    if (synced()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const done = (): void => {
        signal?.removeEventListener("abort", aborted);
        resolve();
      };
      const aborted = (): void => {
        waiters.delete(done);
        reject(signal?.reason as Error);
      };
      if (signal?.aborted === true) {
        aborted();
        return;
      }
      waiters.add(done);
      signal?.addEventListener("abort", aborted, { once: true });
    });
  };
  return {
    reads: { current: () => health().current, synced, health, whenSynced },
    settle() {
      if (!synced()) return;
      for (const resolve of waiters) resolve();
      waiters.clear();
    },
  };
}
