// Shared by the Kubernetes adapter suites: machines, objects to create, the example manifests, and a
// bounded wait for what a watch shows.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ApiException, KubernetesObjectApi, type CoreV1Api, type KubeConfig, type KubernetesObject, type V1Node } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import type { Machine, Taint } from "../../../src/domain/model.ts";
import type { RetrySettings } from "../../../src/adapters/kubernetes/reflector.ts";

export const fastRetry: RetrySettings = { initialMs: 100, maxMs: 1_000 };

export function machine(name: string, index = 0): Machine {
  return { name, group: "workers", power: { backend: "esphome", key: `plug-${name}`, label: `plug of ${name}`, measuresWatts: false }, index, hold: false };
}

/** Polls `read` until it returns something other than undefined/false; fails naming `what` after `timeoutMs`. */
export async function eventually<T>(what: string, read: () => T | undefined | false, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

export interface NodeSpec {
  readonly name: string;
  readonly providerID?: string;
  readonly ready?: boolean;
  readonly readySince?: string;
  readonly taints?: readonly Taint[];
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly capacity?: Record<string, string>;
  readonly allocatable?: Record<string, string>;
}

export function nodeBody(spec: NodeSpec): V1Node {
  return {
    metadata: { name: spec.name, labels: spec.labels ?? {}, annotations: spec.annotations ?? {} },
    spec: { ...(spec.providerID === undefined ? {} : { providerID: spec.providerID }), taints: [...(spec.taints ?? [])] },
    status: {
      ...(spec.capacity === undefined ? {} : { capacity: spec.capacity }),
      ...(spec.allocatable === undefined ? {} : { allocatable: spec.allocatable }),
      conditions: [{
        type: "Ready",
        status: spec.ready === false ? "False" : "True",
        reason: "KubeletReady",
        lastHeartbeatTime: new Date(spec.readySince ?? "2026-01-01T00:00:00Z"),
        lastTransitionTime: new Date(spec.readySince ?? "2026-01-01T00:00:00Z"),
      }],
    },
  };
}

/** Creates a namespace (with labels) and its `default` ServiceAccount, which pods need; no controller makes it here. */
export async function createNamespace(core: CoreV1Api, name: string, labels: Record<string, string> = {}): Promise<void> {
  await ignoreConflict(core.createNamespace({ body: { metadata: { name, labels } } }));
  await ignoreConflict(core.createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: "default" } } }));
}

async function ignoreConflict(call: Promise<unknown>): Promise<void> {
  await call.catch((error: unknown) => {
    if (!(error instanceof ApiException && error.code === 409)) throw error;
  });
}

/** The objects of one of deploy/examples/*.yaml. */
export function exampleManifest(file: string): KubernetesObject[] {
  const text = readFileSync(join(import.meta.dirname, "..", "..", "..", "deploy", "examples", file), "utf8");
  return parseAllDocuments(text).map((document) => document.toJS() as KubernetesObject);
}

/** Creates each object as the admin, as `kubectl create -f` would. */
export async function apply(kc: KubeConfig, objects: readonly KubernetesObject[]): Promise<void> {
  const client = KubernetesObjectApi.makeApiClient(kc);
  for (const object of objects) await ignoreConflict(client.create(object));
}
