// The cluster view against a real kube-apiserver: what the watches show, what they cost, and how they
// catch up after the apiserver restarts.
import { CoreV1Api, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  createKubernetesClusterView,
  DEFAULT_CONTACT_BOUND_MS,
  type KubernetesClusterView,
} from "../../../src/adapters/kubernetes/cluster-view.ts";
import { powerOffPodManifest } from "../../../src/adapters/kubernetes/power-off-pod.ts";
import { LIST_PAGE_SIZE } from "../../../src/adapters/kubernetes/reflector.ts";
import { POWER_OFF_ANNOTATION, TO_BE_DELETED_TAINT } from "../../../src/domain/model.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { createNamespace, delayingProxy, eventually, fastRetry, machine, nodeBody, throughPort } from "./support.ts";

const namespace = "plugpool";
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

describe("createKubernetesClusterView()", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  let view: KubernetesClusterView;
  const errors: unknown[] = [];

  before(async () => {
    plane = await startControlPlane();
    core = plane.admin().makeApiClient(CoreV1Api);
    await createNamespace(core, namespace);
    view = createKubernetesClusterView(plane.admin(), {
      powerOffNamespace: namespace,
      machines: [machine("worker-1"), machine("worker-2", 1), machine("worker-3", 2)],
      retry: fastRetry,
      onError: (error) => errors.push(error),
    });
    assert.equal(view.synced(), false);
    view.start();
    await view.whenSynced(AbortSignal.timeout(20_000));
  });
  after(async () => {
    await view.stop();
    await plane.stop();
  });

  it("lists each collection once to sync, then answers every call from memory", async () => {
    assert.equal(view.synced(), true);
    assert.equal(view.stats().lists, 4, "nodes, power-off pods, ResourceSlices, the template ConfigMap");
    await core.createNode({ body: nodeBody({ name: "worker-1", providerID: "k3s://worker-1" }) });
    await eventually("worker-1 in the view", () => view.nodeNamed("worker-1"));

    const before = view.stats();
    for (let i = 0; i < 1_000; i += 1) {
      view.nodeNamed("worker-1");
      view.nodesWithProviderID("k3s://worker-1");
      view.current();
      view.powerOffPod("worker-1");
      view.templateSlices("worker-1");
    }
    assert.deepEqual(view.stats(), before);
    await core.deleteNode({ name: "worker-1" });
    await eventually("worker-1 gone", () => view.nodeNamed("worker-1") === undefined);
  });

  it("shows a Node as it is created, changed and deleted", async () => {
    const object = await core.createNode({
      body: nodeBody({
        name: "worker-2",
        providerID: "k3s://worker-2",
        readySince: "2026-03-01T10:00:00Z",
        taints: [{ key: "example.com/gpu", value: "true", effect: "NoSchedule" }],
        labels: { "example.com/pool": "workers" },
        annotations: { "example.com/note": "x" },
      }),
    });
    const created = await eventually("worker-2 in the view", () => view.nodeNamed("worker-2"));
    // The apiserver adds node.kubernetes.io/not-ready to every new Node (TaintNodesByCondition).
    assert.equal(created.uid, object.metadata?.uid, "its uid");
    assert.deepEqual({ ...created, taints: created.taints.filter((t) => t.key.startsWith("example.com/")) }, {
      name: "worker-2",
      uid: object.metadata?.uid,
      providerID: "k3s://worker-2",
      ready: true,
      readyChangedAt: Date.parse("2026-03-01T10:00:00Z"),
      createdAt: created.createdAt,
      taints: [{ key: "example.com/gpu", value: "true", effect: "NoSchedule" }],
      annotations: { "example.com/note": "x" },
      labels: { "example.com/pool": "workers" },
    });
    assert.deepEqual(view.nodesWithProviderID("k3s://worker-2"), [created]);

    await core.patchNode({
      name: "worker-2",
      body: {
        metadata: { annotations: { [POWER_OFF_ANNOTATION]: "1700000000000" } },
        spec: { taints: [{ key: TO_BE_DELETED_TAINT, value: "1700000000", effect: "NoSchedule" }] },
      },
    }, mergePatch);
    await core.patchNodeStatus({
      name: "worker-2",
      body: { status: { conditions: [{ type: "Ready", status: "False", reason: "NodeStatusUnknown", lastTransitionTime: "2026-03-01T11:00:00Z", lastHeartbeatTime: "2026-03-01T11:00:00Z" }] } },
    }, setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch));
    const changed = await eventually("worker-2 NotReady", () => view.nodeNamed("worker-2")?.ready === false && view.nodeNamed("worker-2"));
    assert.equal(changed.readyChangedAt, Date.parse("2026-03-01T11:00:00Z"));
    assert.deepEqual(changed.taints, [{ key: TO_BE_DELETED_TAINT, value: "1700000000", effect: "NoSchedule" }]);
    assert.equal(changed.annotations[POWER_OFF_ANNOTATION], "1700000000000");

    await core.deleteNode({ name: "worker-2" });
    await eventually("worker-2 gone", () => view.nodeNamed("worker-2") === undefined);
    assert.deepEqual(view.nodesWithProviderID("k3s://worker-2"), []);
  });

  it("answers the Nodes created after a time, whatever they claim, from their creationTimestamp", async () => {
    // creationTimestamp has whole seconds: a Node created now reads at most a second earlier.
    const before = Date.now() - 1_000;
    await core.createNode({ body: nodeBody({ name: "wroker-9", providerID: "k3s://wroker-9", ready: false }) });
    const stranger = await eventually("wroker-9 in the view", () => view.nodeNamed("wroker-9"));
    assert.ok(stranger.createdAt !== undefined && stranger.createdAt >= before - 1_000 && stranger.createdAt <= Date.now());
    const stats = view.stats();
    assert.deepEqual(view.nodesCreatedAfter(before - 1_000).map((n) => n.name), ["wroker-9"]);
    assert.deepEqual(view.nodesCreatedAfter(stranger.createdAt), []);
    assert.deepEqual(view.stats(), stats, "answered from memory");
    await core.deleteNode({ name: "wroker-9" });
    await eventually("wroker-9 gone", () => view.nodesCreatedAfter(before - 1_000).length === 0);
  });

  it("shows a Node without providerID by name only", async () => {
    await core.createNode({ body: nodeBody({ name: "bare" }) });
    const bare = await eventually("bare in the view", () => view.nodeNamed("bare"));
    assert.equal(bare.providerID, "");
    assert.deepEqual(view.nodesWithProviderID(""), []);
    await core.deleteNode({ name: "bare" });
  });

  it("shows every Node that carries a providerID, not only one of them", async () => {
    await core.createNode({ body: nodeBody({ name: "twin-a", providerID: "k3s://twin" }) });
    await core.createNode({ body: nodeBody({ name: "twin-b", providerID: "k3s://twin" }) });
    await eventually("both twins in the view", () => view.nodeNamed("twin-a") !== undefined && view.nodeNamed("twin-b") !== undefined);
    assert.deepEqual(view.nodesWithProviderID("k3s://twin").map((n) => n.name).sort(), ["twin-a", "twin-b"]);
    await core.deleteNode({ name: "twin-a" });
    await eventually("twin-a gone", () => view.nodeNamed("twin-a") === undefined);
    assert.deepEqual(view.nodesWithProviderID("k3s://twin").map((n) => n.name), ["twin-b"]);
    await core.deleteNode({ name: "twin-b" });
  });

  it("shows plugpool's power-off pods, terminating ones too, and no other pod", async () => {
    const pod = powerOffPodManifest({ namespace, image: "busybox:1.37.0", machine: "worker-3", nodeName: "worker-3", startedAt: 1_700_000_000_123 });
    await core.createNamespacedPod({ namespace, body: pod });
    // Same machine label, but not plugpool's: no managed-by/component labels.
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: "lookalike", labels: { "plugpool.io/machine": "worker-1" }, annotations: { "plugpool.io/machine": "worker-1" } },
        spec: { nodeName: "worker-1", containers: [{ name: "c", image: "busybox:1.37.0" }] },
      },
    });
    const shown = await eventually("the power-off pod", () => view.powerOffPod("worker-3"));
    assert.deepEqual(shown, { machine: "worker-3", nodeName: "worker-3", startedAt: 1_700_000_000_123, phase: "Pending", terminating: false });
    assert.equal(view.powerOffPod("worker-1"), undefined);

    // No kubelet confirms, so a graceful delete leaves the pod terminating.
    await core.deleteNamespacedPod({ name: pod.metadata?.name ?? "", namespace, gracePeriodSeconds: 30 });
    await eventually("the pod terminating", () => view.powerOffPod("worker-3")?.terminating);
    await core.deleteNamespacedPod({ name: pod.metadata?.name ?? "", namespace, gracePeriodSeconds: 0 });
    await eventually("the pod gone", () => view.powerOffPod("worker-3") === undefined);
  });

  it("shows why a power-off pod cannot run, from its watch and from a list alike", async () => {
    const pod = powerOffPodManifest({ namespace, image: "registry.invalid/none:1", machine: "worker-2", nodeName: "worker-2", startedAt: 7 });
    const name = pod.metadata?.name ?? "";
    await core.createNamespacedPod({ namespace, body: pod });
    // What a kubelet reports for an image it cannot pull.
    await core.patchNamespacedPodStatus({
      name,
      namespace,
      body: {
        status: {
          phase: "Pending",
          containerStatuses: [{
            name: "power-off", ready: false, restartCount: 0, image: "registry.invalid/none:1", imageID: "",
            state: { waiting: { reason: "ImagePullBackOff", message: "Back-off pulling image" } },
          }],
        },
      },
    }, setHeaderOptions("Content-Type", PatchStrategy.MergePatch));
    const watched = await eventually("the stuck pod", () => view.powerOffPod("worker-2")?.stuck !== undefined && view.powerOffPod("worker-2"));
    assert.equal(watched.stuck, "ImagePullBackOff");
    const late = createKubernetesClusterView(plane.admin(), { powerOffNamespace: namespace, machines: [machine("worker-2")] });
    late.start();
    await late.whenSynced(AbortSignal.timeout(20_000));
    assert.deepEqual(late.powerOffPod("worker-2"), watched);
    await late.stop();
    await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
    await eventually("the stuck pod gone", () => view.powerOffPod("worker-2") === undefined);
  });

  it("calls change listeners on Node changes until they unsubscribe", async () => {
    let calls = 0;
    const unsubscribe = view.onChange(() => { calls += 1; });
    await core.createNode({ body: nodeBody({ name: "listened" }) });
    await eventually("a change call", () => calls > 0);
    unsubscribe();
    const seen = calls;
    await core.deleteNode({ name: "listened" });
    await eventually("listened gone", () => view.nodeNamed("listened") === undefined);
    assert.equal(calls, seen);
  });

  it("drops, at its relist, a Node deleted while it could not reach the apiserver", async () => {
    const server = new URL(plane.admin().getCurrentCluster()?.server ?? "");
    const target = { host: server.hostname, port: Number(server.port) };
    let proxy = await delayingProxy(target, 0);
    const cut = createKubernetesClusterView(throughPort(plane.admin(), proxy.port), { powerOffNamespace: namespace, machines: [], retry: fastRetry });
    cut.start();
    try {
      await core.createNode({ body: nodeBody({ name: "gone-meanwhile", providerID: "k3s://gone-meanwhile" }) });
      await eventually("gone-meanwhile in the view", () => cut.nodeNamed("gone-meanwhile"));
      await proxy.stop();
      await core.deleteNode({ name: "gone-meanwhile" });
      await sleep(500);
      assert.ok(cut.nodeNamed("gone-meanwhile") !== undefined, "unheard of while cut off");
      proxy = await delayingProxy(target, 0, proxy.port);
      await eventually("gone-meanwhile dropped", () => cut.nodeNamed("gone-meanwhile") === undefined);
      assert.deepEqual(cut.nodesWithProviderID("k3s://gone-meanwhile"), []);
    } finally {
      await cut.stop();
      await proxy.stop();
    }
  });

  it("catches up by itself after the apiserver restarts", async () => {
    const before = view.stats();
    await plane.restartApiServer();
    await core.createNode({ body: nodeBody({ name: "after-restart", providerID: "k3s://after-restart" }) });
    await eventually("a Node created after the restart", () => view.nodesWithProviderID("k3s://after-restart").length === 1);
    assert.ok(view.stats().lists > before.lists, "relisted after the watches failed");
    assert.ok(errors.length > 0, "the failures were reported");
    assert.equal(view.synced(), true);
  });

  it("is current while its watches hear from the apiserver, and no longer once they have not for the bound", async () => {
    // The clock runs ahead on demand, so the bound passes without waiting for it.
    let ahead = 0;
    const clocked = createKubernetesClusterView(plane.admin(), {
      powerOffNamespace: namespace, machines: [machine("worker-1")], retry: fastRetry, now: () => Date.now() + ahead,
    });
    assert.deepEqual(clocked.health(), { current: false, synced: false, lastContactAt: undefined });
    clocked.start();
    try {
      await clocked.whenSynced(AbortSignal.timeout(20_000));
      assert.equal(clocked.current(), true);
      await plane.stopApiServer();
      try {
        assert.equal(clocked.current(), true, "what it heard last is still recent");
        ahead += DEFAULT_CONTACT_BOUND_MS + 1_000;
        assert.equal(clocked.current(), false);
        // A few rounds of failed relists change nothing.
        await sleep(1_500);
        const health = clocked.health();
        assert.equal(health.current, false);
        assert.equal(health.synced, true, "synced() stays true: the view still holds what it saw");
        assert.ok(health.lastContactAt !== undefined && Date.now() + ahead - health.lastContactAt > DEFAULT_CONTACT_BOUND_MS);
      } finally {
        await plane.startApiServer();
      }
      await eventually("current again once the apiserver is back", () => clocked.current());
      assert.ok((clocked.health().lastContactAt ?? 0) > Date.now(), "contact taken by the clock ahead");
    } finally {
      await clocked.stop();
    }
  });

  it("takes its bound from the options", async () => {
    let ahead = 0;
    const strict = createKubernetesClusterView(plane.admin(), {
      powerOffNamespace: namespace, machines: [], contactBoundMs: 5_000, now: () => Date.now() + ahead,
    });
    strict.start();
    try {
      await strict.whenSynced(AbortSignal.timeout(20_000));
      // The watches start after the lists; their start is contact too.
      await sleep(1_000);
      const at = strict.health().lastContactAt ?? 0;
      // No await from here on: nothing can be heard in between.
      ahead = at + 4_000 - Date.now();
      assert.equal(strict.current(), true);
      ahead = at + 6_000 - Date.now();
      assert.equal(strict.current(), false);
    } finally {
      await strict.stop();
    }
  });

  it("reads what it lists at start the same as what its watches bring", async () => {
    const pod = powerOffPodManifest({ namespace, image: "busybox:1.37.0", machine: "worker-1", nodeName: "early", startedAt: 42 });
    await core.createNode({ body: nodeBody({ name: "early", providerID: "k3s://early", readySince: "2026-04-01T00:00:00Z" }) });
    await core.createNamespacedPod({ namespace, body: pod });
    const watched = await eventually("early in the running view", () => view.nodeNamed("early"));
    const watchedPod = await eventually("the pod in the running view", () => view.powerOffPod("worker-1"));
    const late = createKubernetesClusterView(plane.admin(), { powerOffNamespace: namespace, machines: [machine("worker-1")] });
    late.start();
    await late.whenSynced(AbortSignal.timeout(20_000));
    assert.deepEqual(late.nodeNamed("early"), watched);
    assert.equal(watched.readyChangedAt, Date.parse("2026-04-01T00:00:00Z"));
    assert.deepEqual(late.powerOffPod("worker-1"), watchedPod);
    await late.stop();
    await core.deleteNamespacedPod({ name: pod.metadata?.name ?? "", namespace, gracePeriodSeconds: 0 });
  });

  it("lists a cluster larger than a page in pages, and shows every Node of it", async () => {
    // Two full pages and one more Node: the third page is the last.
    const count = 2 * LIST_PAGE_SIZE + 1;
    const names = Array.from({ length: count }, (_, i) => `paged-${String(i).padStart(4, "0")}`);
    const eachOf = async (act: (name: string) => Promise<unknown>): Promise<void> => {
      const queue = [...names];
      await Promise.all(Array.from({ length: 16 }, async () => {
        for (let name = queue.shift(); name !== undefined; name = queue.shift()) await act(name);
      }));
    };
    await eachOf((name) => core.createNode({ body: nodeBody({ name, providerID: `k3s://${name}` }) }));
    const present = (await core.listNode({})).items.length;
    const late = createKubernetesClusterView(plane.admin(), { powerOffNamespace: namespace, machines: [] });
    try {
      late.start();
      await late.whenSynced(AbortSignal.timeout(60_000));
      const pages = Math.ceil(present / LIST_PAGE_SIZE);
      assert.equal(late.stats().lists, pages + 3, `${pages} pages of ${present} Nodes, then the pods, ResourceSlices and ConfigMap`);
      for (const name of names) assert.equal(late.nodeNamed(name)?.providerID, `k3s://${name}`, name);
    } finally {
      await late.stop();
      await eachOf((name) => core.deleteNode({ name }));
    }
  });

  it("rejects whenSynced() when its signal aborts first", async () => {
    const idle = createKubernetesClusterView(plane.admin(), { powerOffNamespace: namespace, machines: [] });
    await assert.rejects(idle.whenSynced(AbortSignal.abort(new Error("gave up"))), /gave up/);
    await idle.stop();
  });
});
