// The cluster as plugpool needs it, kept in memory by watches (SPEC §3: watch, not polling): Nodes,
// plugpool's power-off pods, and the DRA devices of each machine. Every ClusterView answer comes from
// memory, so once synced a cluster-autoscaler call costs no request at all (stats() counts them).
import { CoreV1Api, Watch, type KubeConfig } from "@kubernetes/client-node";
import type { ClusterView } from "../../domain/ports.ts";
import type { DeviceSlice, Machine, NodeView, PowerOffPodView } from "../../domain/model.ts";
import { createReflector, defaultRetry, type Reflector, type RequestStats, type RetrySettings } from "./reflector.ts";
import { POWER_OFF_POD_SELECTOR, toPowerOffPodView } from "./power-off-pod.ts";
import { createTemplateSlices } from "./template-slices.ts";
import { toNodeView } from "./wire.ts";

export interface KubernetesClusterViewOptions {
  /** Where plugpool's power-off pods and its template-slices ConfigMap live. */
  readonly powerOffNamespace: string;
  readonly machines: readonly Machine[];
  /** Backoff between attempts after a failed list or watch (default 0.5 s doubling to 30 s). */
  readonly retry?: RetrySettings;
  /** Every failed list, watch or ConfigMap write; the view retries by itself. */
  readonly onError?: (error: unknown) => void;
}

export interface KubernetesClusterView extends ClusterView {
  /** Starts the watches. Answers are empty until synced. */
  start(): void;
  /** Every watched collection has been listed once. */
  synced(): boolean;
  /** Resolves once synced; rejects if `signal` aborts first. */
  whenSynced(signal?: AbortSignal): Promise<void>;
  /** Calls `listener` after each change to a Node or a power-off pod. Returns the unsubscribe function. */
  onChange(listener: () => void): () => void;
  /** The Node's uid, for Events that refer to it. */
  nodeUid(name: string): string | undefined;
  /** Resolves once the template slices seen so far are stored in their ConfigMap. */
  templateSlicesStored(): Promise<void>;
  /**
   * Requests made so far: list calls and watch starts. A quiet watch is renewed every 30 s (client-node's
   * idle timeout) from the last resourceVersion, without a list.
   */
  stats(): RequestStats;
  /** Stops the watches and pending ConfigMap writes; a stopped view is not started again. */
  stop(): Promise<void>;
}

export function createKubernetesClusterView(kc: KubeConfig, options: KubernetesClusterViewOptions): KubernetesClusterView {
  const core = kc.makeApiClient(CoreV1Api);
  const stats: RequestStats = { lists: 0, watches: 0 };
  const listeners = new Set<() => void>();
  const waiters = new Set<() => void>();
  const deps = { watch: new Watch(kc), stats, retry: options.retry ?? defaultRetry, onError: options.onError ?? (() => undefined) };
  let byProviderID: Map<string, NodeView> | undefined;

  const changed = (): void => {
    for (const listener of listeners) {
      try {
        listener();
      } catch (error) {
        deps.onError(error);
      }
    }
    settleWaiters();
  };

  const nodes = createReflector(
    { path: "/api/v1/nodes", list: () => core.listNode(), convert: toNodeView },
    { ...deps, onChange: () => { byProviderID = undefined; changed(); } },
  );
  const namespace = options.powerOffNamespace;
  const pods = createReflector<PowerOffPodView>(
    {
      path: `/api/v1/namespaces/${namespace}/pods`,
      labelSelector: POWER_OFF_POD_SELECTOR,
      list: () => core.listNamespacedPod({ namespace, labelSelector: POWER_OFF_POD_SELECTOR }),
      convert: toPowerOffPodView,
    },
    { ...deps, onChange: changed },
  );
  const templates = createTemplateSlices(
    kc, { namespace, machines: options.machines.map((m) => m.name) }, { ...deps, onChange: () => { settleWaiters(); } },
  );
  const reflectors: readonly Reflector<unknown>[] = [nodes, pods, ...templates.reflectors];

  const synced = (): boolean => reflectors.every((r) => r.synced());
  function settleWaiters(): void {
    if (!synced()) return;
    for (const resolve of waiters) resolve();
    waiters.clear();
  }

  return {
    nodeNamed: (name) => nodes.items.get(name)?.view,
    nodeWithProviderID(providerID) {
      if (providerID === "") return undefined;
      byProviderID ??= new Map([...nodes.items.values()].map(({ view }) => [view.providerID, view]));
      return byProviderID.get(providerID);
    },
    powerOffPod(machine) {
      for (const pod of pods.items.values()) if (pod.machine === machine) return pod;
      return undefined;
    },
    templateSlices: (machine): readonly DeviceSlice[] | undefined => templates.get(machine),

    start() {
      for (const reflector of reflectors) reflector.start();
    },
    synced,
    whenSynced(signal) {
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
    },
    onChange(listener) {
      const own = (): void => { listener(); };
      listeners.add(own);
      return () => { listeners.delete(own); };
    },
    nodeUid: (name) => nodes.items.get(name)?.uid,
    templateSlicesStored: () => templates.flushed(),
    stats: () => ({ ...stats }),
    async stop() {
      templates.stop();
      await Promise.all(reflectors.map((r) => r.stop()));
    },
  };
}
