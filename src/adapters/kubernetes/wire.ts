// Reading Kubernetes objects into the domain's views, defensively: objects arrive as plain JSON from
// watches and as client-node's typed models from lists. The two differ where a reader looks: times
// are strings in JSON and Date objects in the models, and a device's int attribute is `int` in JSON
// and `_int` in the models. Every reader here accepts both.
import type { Device, DeviceAttribute, DeviceSlice, NodeView, Taint, TaintEffect } from "../../domain/model.ts";

export type Json = Readonly<Record<string, unknown>>;

export function record(value: unknown): Json | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}

export function text(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

export function list(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : [];
}

export function stringMap(value: unknown): Record<string, string> {
  const entries = Object.entries(record(value) ?? {}).filter((e): e is [string, string] => typeof e[1] === "string");
  return Object.fromEntries(entries);
}

/** Epoch ms of a Kubernetes time (RFC 3339 string or Date); undefined when absent or unreadable. */
export function millis(value: unknown): number | undefined {
  if (!(typeof value === "string" || value instanceof Date)) return undefined;
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? undefined : ms;
}

export interface Meta {
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly creationTimestamp?: number;
  /** Deletion has been requested. */
  readonly deleting: boolean;
}

/** The object's metadata, or undefined when it has no name (not an object of the API). */
export function metaOf(object: unknown): Meta | undefined {
  const meta = record(record(object)?.metadata);
  const name = text(meta?.name);
  if (meta === undefined || name === undefined || name === "") return undefined;
  const created = millis(meta.creationTimestamp);
  return {
    name,
    namespace: text(meta.namespace) ?? "",
    uid: text(meta.uid) ?? "",
    resourceVersion: text(meta.resourceVersion) ?? "",
    labels: stringMap(meta.labels),
    annotations: stringMap(meta.annotations),
    ...(created === undefined ? {} : { creationTimestamp: created }),
    deleting: meta.deletionTimestamp !== undefined && meta.deletionTimestamp !== null,
  };
}

const taintEffects: readonly string[] = ["NoSchedule", "PreferNoSchedule", "NoExecute"] satisfies TaintEffect[];

function taint(value: unknown): Taint | undefined {
  const t = record(value);
  const key = text(t?.key);
  const effect = text(t?.effect);
  if (key === undefined || effect === undefined || !taintEffects.includes(effect)) return undefined;
  return { key, value: text(t?.value) ?? "", effect: effect as TaintEffect };
}

/** A Node as the domain sees it. */
export function toNodeView(object: unknown): NodeView | undefined {
  const meta = metaOf(object);
  if (meta === undefined) return undefined;
  const node = record(object);
  const spec = record(node?.spec);
  const conditions = list(record(node?.status)?.conditions).map(record);
  const ready = conditions.find((c) => c?.type === "Ready");
  const readyChangedAt = millis(ready?.lastTransitionTime);
  return {
    name: meta.name,
    uid: meta.uid,
    providerID: text(spec?.providerID) ?? "",
    ready: ready?.status === "True",
    ...(readyChangedAt === undefined ? {} : { readyChangedAt }),
    ...(meta.creationTimestamp === undefined ? {} : { createdAt: meta.creationTimestamp }),
    taints: list(spec?.taints).map(taint).filter((t) => t !== undefined),
    annotations: meta.annotations,
    labels: meta.labels,
  };
}

function attribute(value: unknown): DeviceAttribute | undefined {
  const a = record(value);
  const int = a?.int ?? a?._int;
  if (typeof int === "number") return { int };
  if (typeof a?.bool === "boolean") return { bool: a.bool };
  if (typeof a?.string === "string") return { string: a.string };
  if (typeof a?.version === "string") return { version: a.version };
  // List-valued attributes have no place in the domain's model; leaving them out keeps the rest.
  return undefined;
}

function device(value: unknown): Device | undefined {
  const d = record(value);
  const name = text(d?.name);
  if (name === undefined) return undefined;
  const attributes = Object.entries(record(d?.attributes) ?? {})
    .map(([k, v]) => [k, attribute(v)] as const)
    .filter((e): e is readonly [string, DeviceAttribute] => e[1] !== undefined);
  // A quantity string (a stored DeviceSlice) or a DeviceCapacity `{ value }` (the API).
  const capacity = Object.entries(record(d?.capacity) ?? {})
    .map(([k, v]) => [k, text(v) ?? text(record(v)?.value)] as const)
    .filter((e): e is readonly [string, string] => e[1] !== undefined);
  return { name, attributes: Object.fromEntries(attributes), capacity: Object.fromEntries(capacity) };
}

/**
 * A node-local device slice from a ResourceSlice's `spec`, or from a DeviceSlice stored as JSON (the same
 * shape but for capacity). Undefined for a slice that is not bound to one node.
 */
export function toDeviceSlice(spec: unknown): DeviceSlice | undefined {
  const s = record(spec);
  const driver = text(s?.driver);
  const nodeName = text(s?.nodeName);
  const pool = record(s?.pool);
  const poolName = text(pool?.name);
  if (driver === undefined || nodeName === undefined || nodeName === "" || poolName === undefined) return undefined;
  return {
    driver,
    nodeName,
    pool: {
      name: poolName,
      generation: typeof pool?.generation === "number" ? pool.generation : 0,
      resourceSliceCount: typeof pool?.resourceSliceCount === "number" ? pool.resourceSliceCount : 1,
    },
    devices: list(s?.devices).map(device).filter((d) => d !== undefined),
  };
}
