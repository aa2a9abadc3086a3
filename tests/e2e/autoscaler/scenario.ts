// What every autoscaler scenario shares: its duration printed (the suite's time budget is watched), the logs'
// tails on failure, and the workload pods.
import assert from "node:assert/strict";
import type { CoreV1Api, CoreV1Event, V1Pod } from "@kubernetes/client-node";
import { eventually } from "../../harness/eventually.ts";
import type { CallRecord, EmulatedPlug } from "../../harness/plug-emulator/index.ts";
import { POOL_LABEL } from "../../harness/site/index.ts";

/**
 * Wraps a scenario's body: prints how long it took, and on failure adds `diagnostics()` (the logs' tails) to
 * the error message.
 */
export function scenario(name: string, diagnostics: () => string, body: () => Promise<void>): () => Promise<void> {
  return async () => {
    const started = performance.now();
    try {
      await body();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`${message}\n${diagnostics()}`, { cause: error });
    } finally {
      console.log(`scenario "${name}": ${((performance.now() - started) / 1000).toFixed(1)} s`);
    }
  };
}

/**
 * A pod of 1 CPU (or `cpu`) that only the pool's machines can run (nodeSelector on the template label); with
 * `claim`, its container uses the devices of that ResourceClaim (in namespace default).
 */
export async function createPoolPod(core: CoreV1Api, name: string, options: { readonly cpu?: string; readonly claim?: string } = {}): Promise<void> {
  await core.createNamespacedPod({
    namespace: "default",
    body: {
      metadata: { name, labels: { app: "e2e" } },
      spec: {
        nodeSelector: { ...POOL_LABEL },
        terminationGracePeriodSeconds: 0,
        ...(options.claim !== undefined && { resourceClaims: [{ name: "devices", resourceClaimName: options.claim }] }),
        containers: [{
          name: "app",
          image: "registry.k8s.io/pause:3.10",
          resources: { requests: { cpu: options.cpu ?? "1", memory: "1Gi" }, ...(options.claim !== undefined && { claims: [{ name: "devices" }] }) },
        }],
      },
    },
  });
}

/** Creates a pool pod and waits (up to a minute) until a machine runs it; resolves with its node. */
export async function runPoolPod(core: CoreV1Api, name: string): Promise<string> {
  await createPoolPod(core, name);
  let node = "";
  await eventually(`pod ${name} Running`, async () => {
    const pod = await readPod(core, name);
    assert.equal(pod.status?.phase, "Running");
    node = pod.spec?.nodeName ?? "";
  }, 60_000, 250);
  return node;
}

/** Deletes the pod at once (the simulated kubelets do not confirm graceful deletions). */
export async function deletePod(core: CoreV1Api, name: string): Promise<void> {
  await core.deleteNamespacedPod({ namespace: "default", name, gracePeriodSeconds: 0 });
}

/** Deletes every pod `createPoolPod` made, at once. */
export async function deleteAllPods(core: CoreV1Api): Promise<void> {
  await core.deleteCollectionNamespacedPod({ namespace: "default", labelSelector: "app=e2e", gracePeriodSeconds: 0 });
}

export async function readPod(core: CoreV1Api, name: string): Promise<V1Pod> {
  return core.readNamespacedPod({ namespace: "default", name });
}

/** Names of the Nodes that exist now. */
export async function nodeNames(core: CoreV1Api): Promise<string[]> {
  return (await core.listNode()).items.map((n) => n.metadata?.name ?? "").sort();
}

/** Every switch-on request that reached the plug (whatever the answer): `/switch/<relay>/turn_on`. */
export function turnOnRequests(plug: EmulatedPlug): readonly CallRecord[] {
  return plug.calls.filter((c) => /^\/switch\/[^/?]+\/turn_on(\?|$)/.test(c.path));
}

/** Every switch-off request that reached the plug (whatever the answer): `/switch/<relay>/turn_off`. */
export function turnOffRequests(plug: EmulatedPlug): readonly CallRecord[] {
  return plug.calls.filter((c) => /^\/switch\/[^/?]+\/turn_off(\?|$)/.test(c.path));
}

/** The Warning Events with this reason, in any namespace, about `name` (their object, or named in the message). */
export async function warningsAbout(core: CoreV1Api, reason: string, name: string): Promise<CoreV1Event[]> {
  const { items } = await core.listEventForAllNamespaces({ fieldSelector: `reason=${reason}` });
  const named = new RegExp(`(^|[^\\w-])${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}($|[^\\w-])`);
  return items.filter((e) => e.type === "Warning" && (e.involvedObject.name === name || named.test(e.message ?? "")));
}
