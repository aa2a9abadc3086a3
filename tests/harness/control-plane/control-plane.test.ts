// Smoke test of the test control plane: the behaviours the cluster-facing suites rely on.
import {
  ApiException,
  AuthenticationV1Api,
  CoreV1Api,
  KubeConfig,
  Watch,
  type V1Node,
  type V1Pod,
} from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { binaryDir, binaryPath, startControlPlane, type ControlPlane } from "./index.ts";

describe("startControlPlane()", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  before(async () => {
    plane = await startControlPlane({ controllerManager: true, scheduler: true });
    core = plane.admin().makeApiClient(CoreV1Api);
  });
  after(async () => {
    await plane.stop();
  });

  it("lets the admin create a Namespace and list Nodes", async () => {
    await core.createNamespace({ body: { metadata: { name: "admin-check" } } });
    const namespace = await core.readNamespace({ name: "admin-check" });
    assert.equal(namespace.metadata?.name, "admin-check");
    const nodes = await core.listNode();
    assert.ok(Array.isArray(nodes.items));
  });

  it("writes kubeconfig files that authenticate as their identity", async () => {
    await core.createNamespace({ body: { metadata: { name: "kubeconfig-check" } } });
    const fromFile = (path: string): KubeConfig => {
      const kc = new KubeConfig();
      kc.loadFromFile(path);
      return kc;
    };
    const serviceAccount = await plane.asServiceAccount("kubeconfig-check", "reader");
    assert.deepEqual(await whoAmI(fromFile(plane.kubeconfigPath)), { user: "plugpool-test-admin", masters: true });
    assert.deepEqual(await whoAmI(fromFile(await plane.kubeconfigFor(serviceAccount))), {
      user: "system:serviceaccount:kubeconfig-check:reader",
      masters: false,
    });
  });

  it("forbids a ServiceAccount without RBAC to list Nodes", async () => {
    await core.createNamespace({ body: { metadata: { name: "rbac-check" } } });
    const kc = await plane.asServiceAccount("rbac-check", "nobody");
    await assert.rejects(kc.makeApiClient(CoreV1Api).listNode(), (error: unknown) =>
      error instanceof ApiException && error.code === 403);
  });

  it("enforces Pod Security per namespace label", async () => {
    for (const level of ["restricted", "privileged"]) {
      await core.createNamespace({
        body: { metadata: { name: `pss-${level}`, labels: { "pod-security.kubernetes.io/enforce": level } } },
      });
      // Pod admission needs the namespace's default ServiceAccount, which the controller-manager creates.
      await waitForWatchEvent(plane.admin(), `/api/v1/namespaces/pss-${level}/serviceaccounts`, "metadata.name=default", () => true);
    }
    const privilegedPod: V1Pod = {
      metadata: { name: "power-off" },
      spec: {
        hostPID: true,
        containers: [{ name: "main", image: "busybox:1.37.0", securityContext: { privileged: true } }],
      },
    };
    await assert.rejects(
      core.createNamespacedPod({ namespace: "pss-restricted", body: privilegedPod, dryRun: "All" }),
      (error: unknown) => error instanceof ApiException && error.code === 403 && String(error.body).includes("violates PodSecurity"),
    );
    const admitted = await core.createNamespacedPod({ namespace: "pss-privileged", body: privilegedPod, dryRun: "All" });
    assert.equal(admitted.metadata?.name, "power-off");
  });

  it("marks a Node without heartbeats NotReady", async () => {
    const now = new Date();
    await core.createNode({
      body: {
        metadata: { name: "silent-node" },
        status: { conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", lastHeartbeatTime: now, lastTransitionTime: now }] },
      },
    });
    assert.equal(readyStatus(await core.readNode({ name: "silent-node" })), "True");
    await waitForWatchEvent(plane.admin(), "/api/v1/nodes", "metadata.name=silent-node",
      (node) => readyStatus(node as V1Node) !== "True");
    assert.notEqual(readyStatus(await core.readNode({ name: "silent-node" })), "True");
  });

  it("schedules a pod onto a Node that fits", async () => {
    const capacity = { cpu: "4", memory: "8Gi", pods: "110" };
    await core.createNode({
      body: {
        metadata: { name: "roomy-node", labels: { "plugpool.test/pool": "roomy" } },
        status: { capacity, allocatable: capacity },
      },
    });
    await core.createNamespace({ body: { metadata: { name: "scheduling-check" } } });
    await waitForWatchEvent(plane.admin(), "/api/v1/namespaces/scheduling-check/serviceaccounts", "metadata.name=default", () => true);
    await core.createNamespacedPod({
      namespace: "scheduling-check",
      body: {
        metadata: { name: "placed" },
        spec: {
          nodeSelector: { "plugpool.test/pool": "roomy" },
          // New Nodes carry not-ready taints until a kubelet reports; none ever will here.
          tolerations: [{ operator: "Exists" }],
          containers: [{ name: "main", image: "busybox:1.37.0" }],
        },
      },
    });
    await waitForWatchEvent(plane.admin(), "/api/v1/namespaces/scheduling-check/pods", "metadata.name=placed",
      (pod) => (pod as V1Pod).spec?.nodeName === "roomy-node");
  });

  it("keeps serving watches across restartApiServer()", async () => {
    let oldWatchEnded = false;
    const oldWatch = await new Watch(plane.admin()).watch("/api/v1/nodes", {}, () => undefined, () => {
      oldWatchEnded = true;
    });
    await plane.restartApiServer();
    assert.ok(oldWatchEnded, "the watch opened before the restart ends with the old server");
    oldWatch.abort();

    const seen = waitForWatchEvent(plane.admin(), "/api/v1/nodes", "metadata.name=after-restart",
      (_node, type) => type === "ADDED");
    await core.createNode({ body: { metadata: { name: "after-restart" } } });
    await seen;
  });
});

describe("startControlPlane() without working binaries", () => {
  it("names build.sh when a binary is missing", (t) => {
    useEmptyCache(t);
    assert.throws(() => binaryPath("kube-apiserver"), /kube-apiserver not found at .*build\.sh/);
  });

  it("rejects with the tail of the log of a process that fails to start", async (t) => {
    useEmptyCache(t);
    mkdirSync(binaryDir(), { recursive: true });
    for (const name of ["etcd", "kube-apiserver"]) {
      writeFileSync(join(binaryDir(), name), `#!/bin/sh\necho "${name} cannot start: port in use" >&2\nexit 3\n`, { mode: 0o755 });
    }
    await assert.rejects(startControlPlane(), /etcd exited before health.*\n.*etcd cannot start: port in use/);
  });
});

/** Points PLUGPOOL_CACHE at an empty folder for the rest of the test. */
function useEmptyCache(t: TestContext): void {
  const saved = process.env.PLUGPOOL_CACHE;
  const cache = mkdtempSync(join(tmpdir(), "plugpool-empty-cache-"));
  process.env.PLUGPOOL_CACHE = cache;
  t.after(() => {
    if (saved === undefined) delete process.env.PLUGPOOL_CACHE;
    else process.env.PLUGPOOL_CACHE = saved;
    rmSync(cache, { recursive: true, force: true });
  });
}

async function whoAmI(kc: KubeConfig): Promise<{ user: string | undefined; masters: boolean }> {
  const review = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
  const info = review.status?.userInfo;
  return { user: info?.username, masters: info?.groups?.includes("system:masters") ?? false };
}

function readyStatus(node: V1Node): string | undefined {
  return node.status?.conditions?.find((condition) => condition.type === "Ready")?.status;
}

/**
 * Resolves at the first watch event (existing objects arrive as ADDED first) that `matches`;
 * rejects if the watch ends or nothing matches within `timeoutMs`.
 */
async function waitForWatchEvent(
  kc: KubeConfig,
  path: string,
  fieldSelector: string,
  matches: (object: unknown, type: string) => boolean,
  // client-node's Watch gives up on its own after 30 s without an event.
  timeoutMs = 25_000,
): Promise<void> {
  const { promise, resolve, reject } = Promise.withResolvers<undefined>();
  const timer = setTimeout(() => { reject(new Error(`no matching event on ${path} (${fieldSelector}) in ${timeoutMs} ms`)); }, timeoutMs);
  const watch = await new Watch(kc).watch(path, { fieldSelector }, (type, object) => {
    if (matches(object, type)) resolve(undefined);
  }, (error: unknown) => {
    reject(error instanceof Error ? error : new Error(`watch on ${path} ended`));
  });
  try {
    await promise;
  } finally {
    clearTimeout(timer);
    watch.abort();
  }
}
