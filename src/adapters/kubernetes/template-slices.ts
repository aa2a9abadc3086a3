// The DRA devices each machine offers, remembered while it is off. The ResourceSlices that
// a configured machine publishes are watched; the last non-empty set per machine is kept in memory and in
// the ConfigMap `plugpool-template-slices` (one key per machine, JSON), which is loaded at start so the
// sets survive power-offs and restarts. That ConfigMap is the only object this module writes (unless read-only).
import { CoreV1Api, ResourceV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { DeviceSlice } from "../../domain/model.ts";
import { callOptions } from "./api-errors.ts";
import { createConfigMapWriter } from "./configmap.ts";
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
  /** `readOnly`: slices are kept in memory only, the ConfigMap is never written (serve --dry-run). */
  options: { readonly namespace: string; readonly machines: readonly string[]; readonly writeTimeoutMs: number; readonly readOnly?: boolean },
  /** `onChange` is called after each change to either collection, once it is taken in. */
  deps: ReflectorDeps,
): TemplateSlices {
  const core = kc.makeApiClient(CoreV1Api);
  const resource = kc.makeApiClient(ResourceV1Api);
  const machines = new Set(options.machines);
  const latest = new Map<string, readonly DeviceSlice[]>();
  const writer = createConfigMapWriter(
    core, { namespace: options.namespace, name: TEMPLATE_SLICES_CONFIGMAP }, { writeTimeoutMs: options.writeTimeoutMs, retry: deps.retry, onError: deps.onError },
  );

  const slices = createReflector<LiveSlice>(
    {
      path: "/apis/resource.k8s.io/v1/resourceslices",
      list: (page, signal) => resource.listResourceSlice(page, callOptions({ signal })),
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
      list: (page, signal) => core.listNamespacedConfigMap(
        { namespace: options.namespace, fieldSelector: `metadata.name=${TEMPLATE_SLICES_CONFIGMAP}`, ...page },
        callOptions({ signal }),
      ),
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
      if (options.readOnly !== true) writer.later({ [machine]: JSON.stringify(set) });
    }
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

  return {
    reflectors: [slices, stored],
    get: (machine) => latest.get(machine),
    flushed: () => writer.flushed(),
    stop: () => { writer.stop(); },
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
