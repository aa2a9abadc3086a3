// Shared by the Kubernetes adapter suites: machines, objects to create, the example manifests, and a
// bounded wait for what a watch shows.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { ApiException, KubeConfig, KubernetesObjectApi, type CoreV1Api, type KubernetesObject, type V1Node } from "@kubernetes/client-node";
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

/**
 * A TCP proxy in front of `target` (host:port) that passes every byte on `delayMs` late, in order, both ways: a
 * client behind it (TLS and all) sees the apiserver as a slow network shows it. Listens on `port` (default: any
 * free one); resolves with its port and its stop, which cuts every connection.
 */
export async function delayingProxy(target: { host: string; port: number }, delayMs: number, port = 0): Promise<{ port: number; stop: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const late = (from: Socket, to: Socket): void => {
    from.on("data", (chunk: Buffer) => {
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, delayMs);
    });
    from.on("close", () => setTimeout(() => to.destroy(), delayMs));
    from.on("error", () => undefined);
  };
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) sockets.add(socket);
    late(client, upstream);
    late(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The kubeconfig `kc` pointed at another port of the same host. */
export function throughPort(kc: KubeConfig, port: number): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromString(kc.exportConfig());
  copy.clusters = copy.clusters.map((c) => {
    const url = new URL(c.server);
    url.port = String(port);
    return { ...c, server: url.origin };
  });
  return copy;
}
