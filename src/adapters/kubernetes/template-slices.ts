// The DRA devices each machine offers, remembered while it is off (SPEC §7). The ResourceSlices that
// a configured machine publishes are watched; the last non-empty set per machine is kept in memory and in
// the ConfigMap `plugpool-template-slices` (one key per machine, JSON), which is loaded at start so the
// sets survive power-offs and restarts. That ConfigMap is the only object this module writes (SPEC §9.5).
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, ResourceV1Api, type KubeConfig, type V1ConfigMap } from "@kubernetes/client-node";
import type { DeviceSlice } from "../../domain/model.ts";
import { clusterError, statusOf } from "./api-errors.ts";
import { createReflector, type Reflector, type ReflectorDeps } from "./reflector.ts";
import { record, stringMap, toDeviceSlice } from "./wire.ts";

export const TEMPLATE_SLICES_CONFIGMAP = "plugpool-template-slices";

export interface TemplateSlices {
  /** The ResourceSlice and ConfigMap watches; the owner starts and stops them. */
  readonly reflectors: readonly Reflector<unknown>[];
  /** Last non-empty set of slices seen for the machine, if any. */
  get(machine: string): readonly DeviceSlice[] | undefined;
  /** Resolves once every change seen so far is written to the ConfigMap (or the store is stopped). */
  flushed(): Promise<void>;
  stop(): void;
}

interface LiveSlice {
  readonly key: string;
  readonly slice: DeviceSlice;
}

export function createTemplateSlices(
  kc: KubeConfig,
  options: { readonly namespace: string; readonly machines: readonly string[] },
  /** `onChange` is called after each change to either collection, once it is taken in. */
  deps: ReflectorDeps,
): TemplateSlices {
  const core = kc.makeApiClient(CoreV1Api);
  const resource = kc.makeApiClient(ResourceV1Api);
  const machines = new Set(options.machines);
  const latest = new Map<string, readonly DeviceSlice[]>();
  const pending = new Map<string, readonly DeviceSlice[]>();
  const stopping = new AbortController();
  let writing: Promise<void> | undefined;

  const slices = createReflector<LiveSlice>(
    {
      path: "/apis/resource.k8s.io/v1/resourceslices",
      list: () => resource.listResourceSlice(),
      convert: (object) => {
        const slice = toDeviceSlice(record(object)?.spec);
        const name = String(record(record(object)?.metadata)?.name);
        return slice !== undefined && machines.has(slice.nodeName) ? { key: name, slice } : undefined;
      },
    },
    { ...deps, onChange: () => { observeLive(); deps.onChange(); } },
  );

  const stored = createReflector<Record<string, string>>(
    {
      path: `/api/v1/namespaces/${options.namespace}/configmaps`,
      // By name: RBAC can then limit the read to this one ConfigMap.
      fieldSelector: `metadata.name=${TEMPLATE_SLICES_CONFIGMAP}`,
      list: () => core.listNamespacedConfigMap({ namespace: options.namespace, fieldSelector: `metadata.name=${TEMPLATE_SLICES_CONFIGMAP}` }),
      convert: (object) => stringMap(record(object)?.data),
    },
    { ...deps, onChange: () => { loadStored(); deps.onChange(); } },
  );

  function observeLive(): void {
    const byMachine = new Map<string, LiveSlice[]>();
    for (const live of slices.items.values()) {
      byMachine.set(live.slice.nodeName, [...(byMachine.get(live.slice.nodeName) ?? []), live]);
    }
    for (const [machine, found] of byMachine) {
      const set = found.sort(bySliceOrder).map((l) => l.slice);
      if (JSON.stringify(set) === JSON.stringify(latest.get(machine))) continue;
      latest.set(machine, set);
      pending.set(machine, set);
    }
    if (pending.size > 0) writing ??= drain().finally(() => { writing = undefined; });
  }

  // What was stored fills in machines not seen publishing since start; what is seen live is newer.
  function loadStored(): void {
    for (const data of stored.items.values()) {
      for (const [machine, json] of Object.entries(data)) {
        if (!machines.has(machine) || latest.has(machine)) continue;
        const set = parseStored(json);
        if (set !== undefined && set.length > 0) latest.set(machine, set);
        else deps.onError(new Error(`ignoring unreadable template slices of machine "${machine}" in ConfigMap ${TEMPLATE_SLICES_CONFIGMAP}`));
      }
    }
  }

  async function drain(): Promise<void> {
    let delayMs = deps.retry.initialMs;
    while (pending.size > 0 && !stopping.signal.aborted) {
      const batch = new Map(pending);
      try {
        await write(batch);
        for (const [machine, set] of batch) if (pending.get(machine) === set) pending.delete(machine);
        delayMs = deps.retry.initialMs;
      } catch (error) {
        deps.onError(error);
        await sleep(delayMs, undefined, { signal: stopping.signal }).catch(() => undefined);
        delayMs = Math.min(delayMs * 2, deps.retry.maxMs);
      }
    }
  }

  async function write(batch: ReadonlyMap<string, readonly DeviceSlice[]>): Promise<void> {
    const { namespace } = options;
    const name = TEMPLATE_SLICES_CONFIGMAP;
    const updates = Object.fromEntries([...batch].map(([machine, set]) => [machine, JSON.stringify(set)]));
    // Read-modify-write under the resourceVersion: a concurrent change (409 Conflict) means read again.
    for (let attempt = 1; ; attempt += 1) {
      let current: V1ConfigMap | undefined;
      try {
        current = await core.readNamespacedConfigMap({ name, namespace });
      } catch (error) {
        if (statusOf(error) !== 404) throw clusterError(`reading ConfigMap ${namespace}/${name}`, error);
      }
      try {
        if (current === undefined) {
          const metadata = { name, namespace, labels: { "app.kubernetes.io/managed-by": "plugpool" } };
          await core.createNamespacedConfigMap({ namespace, body: { metadata, data: updates } });
        } else {
          // current.metadata carries the resourceVersion the update is conditional on.
          const body = { metadata: current.metadata, binaryData: current.binaryData, data: { ...current.data, ...updates } };
          await core.replaceNamespacedConfigMap({ name, namespace, body });
        }
        return;
      } catch (error) {
        if (statusOf(error) !== 409 || attempt >= 5) throw clusterError(`writing ConfigMap ${namespace}/${name}`, error);
      }
    }
  }

  return {
    reflectors: [slices, stored],
    get: (machine) => latest.get(machine),
    flushed: async () => {
      while (writing !== undefined) await writing;
    },
    stop: () => { stopping.abort(); },
  };
}

function bySliceOrder(a: LiveSlice, b: LiveSlice): number {
  const key = (l: LiveSlice): string => `${l.slice.driver}\u0000${l.slice.pool.name}\u0000${l.key}`;
  return key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0;
}

function parseStored(json: string): DeviceSlice[] | undefined {
  try {
    const value: unknown = JSON.parse(json);
    if (!Array.isArray(value)) return undefined;
    const set = value.map(toDeviceSlice);
    return set.every((s) => s !== undefined) ? set : undefined;
  } catch {
    return undefined;
  }
}
