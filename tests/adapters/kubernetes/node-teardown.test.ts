// The cluster writes of a power-off against a real kube-apiserver: idempotent, limited to plugpool's own
// objects, and refused with a clear reason where the cluster says no.
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createKubernetesNodeTeardown } from "../../../src/adapters/kubernetes/node-teardown.ts";
import { powerOffPodName } from "../../../src/adapters/kubernetes/power-off-pod.ts";
import { isPlugpoolError, type PlugpoolError } from "../../../src/domain/errors.ts";
import { POWER_OFF_ANNOTATION, TO_BE_DELETED_TAINT, type Taint } from "../../../src/domain/model.ts";
import type { NodeTeardown } from "../../../src/domain/ports.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { apply, createNamespace, exampleManifest, machine, nodeBody } from "./support.ts";

const namespace = "plugpool";
const image = "busybox:1.37.0";
const longName = `${"rack-a.shelf-3.".repeat(15)}node-7`;
const worker1 = machine("worker-1");
const worker2 = machine("worker-2", 1);
const worker3 = machine("worker-3", 2);
const longNamed = machine(longName, 3);
const machines = [worker1, worker2, worker3, longNamed];

function coded(code: PlugpoolError["code"], pattern: RegExp) {
  return (error: unknown): boolean => {
    assert.ok(isPlugpoolError(error), `a PlugpoolError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.match(error.message, pattern);
    return true;
  };
}

const drained: Taint = { key: TO_BE_DELETED_TAINT, value: "1", effect: "NoSchedule" };

describe("createKubernetesNodeTeardown()", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  let teardown: NodeTeardown;
  const exists = async (read: () => Promise<unknown>): Promise<boolean> =>
    read().then(() => true, (error: unknown) => {
      if (error instanceof ApiException && error.code === 404) return false;
      throw error;
    });

  before(async () => {
    plane = await startControlPlane();
    core = plane.admin().makeApiClient(CoreV1Api);
    await apply(plane.admin(), exampleManifest("namespace.yaml"));
    await createNamespace(core, namespace);
    await createNamespace(core, "locked", { "pod-security.kubernetes.io/enforce": "restricted" });
    teardown = createKubernetesNodeTeardown(plane.admin(), { namespace, image, machines, providerIDPrefix: "k3s://" });
  });
  after(async () => {
    await plane.stop();
  });

  it("records a power-off on the Node, pending then committed, and clears it, each twice without harm", async () => {
    await core.createNode({ body: nodeBody({ name: "worker-1", annotations: { "example.com/keep": "yes" } }) });
    await teardown.markPowerOff("worker-1", { startedAt: 1_700_000_000_000, pending: true });
    let node = await core.readNode({ name: "worker-1" });
    assert.equal(node.metadata?.annotations?.[POWER_OFF_ANNOTATION], "1700000000000;pending");
    await teardown.markPowerOff("worker-1", { startedAt: 1_700_000_000_000, pending: false });
    await teardown.markPowerOff("worker-1", { startedAt: 1_700_000_000_000, pending: false });
    node = await core.readNode({ name: "worker-1" });
    assert.equal(node.metadata?.annotations?.[POWER_OFF_ANNOTATION], "1700000000000");
    await teardown.clearPowerOffMark("worker-1");
    await teardown.clearPowerOffMark("worker-1");
    node = await core.readNode({ name: "worker-1" });
    assert.deepEqual(node.metadata?.annotations, { "example.com/keep": "yes" });
  });

  it("treats a missing Node as marked, cleared and deleted", async () => {
    await teardown.markPowerOff("worker-2", { startedAt: 1, pending: false });
    await teardown.clearPowerOffMark("worker-2");
    await teardown.deleteNode("worker-2", "a-uid");
  });

  it("creates the power-off pod bound to the node, and creating it again is fine", async () => {
    await teardown.createPowerOffPod(worker1, "worker-1", 1_700_000_000_000);
    await teardown.createPowerOffPod(worker1, "worker-1", 1_700_000_000_000);
    const pod = await core.readNamespacedPod({ name: "plugpool-power-off-worker-1", namespace });
    assert.deepEqual(pod.metadata?.labels, {
      "app.kubernetes.io/managed-by": "plugpool",
      "app.kubernetes.io/component": "power-off",
      "plugpool.io/machine": "worker-1",
    });
    assert.equal(pod.metadata.annotations?.[POWER_OFF_ANNOTATION], "1700000000000");
    const spec = pod.spec;
    assert.ok(spec !== undefined);
    assert.equal(spec.nodeName, "worker-1");
    assert.equal(spec.hostPID, true);
    // JSON round trip: client-node returns model class instances.
    assert.deepEqual(JSON.parse(JSON.stringify(spec.tolerations)), [{ operator: "Exists" }]);
    assert.equal(spec.restartPolicy, "Never");
    assert.equal(spec.priorityClassName, "system-node-critical");
    assert.equal(spec.automountServiceAccountToken, false);
    assert.equal(spec.terminationGracePeriodSeconds, 0);
    const container = spec.containers[0];
    assert.equal(container?.image, image);
    assert.deepEqual(container.command, ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "systemctl", "poweroff"]);
    assert.equal(container.securityContext?.privileged, true);
    assert.deepEqual(container.resources?.requests, { cpu: "10m", memory: "16Mi" });
  });

  it("deletes its power-off pod at once and says it is gone, and deleting a missing one is fine", async () => {
    assert.equal(await teardown.deletePowerOffPod(worker1), true);
    assert.equal(await exists(() => core.readNamespacedPod({ name: "plugpool-power-off-worker-1", namespace })), false);
    assert.equal(await teardown.deletePowerOffPod(worker1), true);
  });

  it("says a power-off pod that the apiserver still holds after the delete is not gone yet", async () => {
    await teardown.createPowerOffPod(worker2, "worker-2", 1);
    const name = powerOffPodName("worker-2");
    // A finalizer keeps the pod, terminating, until it is removed.
    await core.patchNamespacedPod(
      { name, namespace, body: { metadata: { finalizers: ["example.com/hold"] } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.equal(await teardown.deletePowerOffPod(worker2), false);
    const held = await core.readNamespacedPod({ name, namespace });
    assert.ok(held.metadata?.deletionTimestamp !== undefined, "terminating");
    assert.equal(await teardown.deletePowerOffPod(worker2), false, "asking again changes nothing while it is held");
    await core.patchNamespacedPod(
      { name, namespace, body: { metadata: { finalizers: null } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.equal(await teardown.deletePowerOffPod(worker2), true);
  });

  it("gives a machine with a long name a valid pod name and label", async () => {
    await teardown.createPowerOffPod(longNamed, longName, 1);
    const name = powerOffPodName(longName);
    assert.ok(name.length <= 63);
    const pod = await core.readNamespacedPod({ name, namespace });
    assert.equal(pod.metadata?.annotations?.["plugpool.io/machine"], longName);
    assert.notEqual(powerOffPodName(`${longName}x`), name);
    assert.equal(await teardown.deletePowerOffPod(longNamed), true);
  });

  it("refuses to delete a pod with its name that does not carry plugpool's labels", async () => {
    const name = powerOffPodName("worker-3");
    await core.createNamespacedPod({ namespace, body: { metadata: { name }, spec: { nodeName: "worker-3", containers: [{ name: "c", image }] } } });
    await assert.rejects(teardown.deletePowerOffPod(worker3), coded("unsafe", /plugpool's power-off labels/));
    assert.equal(await exists(() => core.readNamespacedPod({ name, namespace })), true);
  });

  it("deletes the Node of a configured machine, by name or by providerID, and no other", async () => {
    const stranger = await core.createNode({ body: nodeBody({ name: "stranger", providerID: "k3s://stranger" }) });
    const byProviderID = await core.createNode({ body: nodeBody({ name: "worker-3.lan", providerID: "k3s://worker-3" }) });
    const uid = (await core.readNode({ name: "worker-1" })).metadata?.uid ?? "";
    await teardown.deleteNode("worker-1", uid);
    await teardown.deleteNode("worker-1", uid);
    await teardown.deleteNode("worker-3.lan", byProviderID.metadata?.uid ?? "");
    await assert.rejects(teardown.deleteNode("stranger", stranger.metadata?.uid ?? ""), coded("unsafe", /"stranger": it is not the Node of a configured machine/));
    assert.equal(await exists(() => core.readNode({ name: "worker-1" })), false);
    assert.equal(await exists(() => core.readNode({ name: "worker-3.lan" })), false);
    assert.equal(await exists(() => core.readNode({ name: "stranger" })), true);
  });

  it("refuses a Node not named after a machine when no providerID prefix is configured", async () => {
    const byNameOnly = createKubernetesNodeTeardown(plane.admin(), { namespace, image, machines });
    const uid = (await core.readNode({ name: "stranger" })).metadata?.uid ?? "";
    await assert.rejects(byNameOnly.deleteNode("stranger", uid), coded("unsafe", /not the Node of a configured machine/));
  });

  it("deletes only the Node it was given: one deleted and registered anew under the name stays", async () => {
    for (const name of ["worker-2", "worker-2.lan"]) {
      const judged = await core.createNode({ body: nodeBody({ name, providerID: "k3s://worker-2", taints: [drained] }) });
      // Someone deletes it and its kubelet registers it anew, Ready and without the taint.
      await core.deleteNode({ name });
      const anew = await core.createNode({ body: nodeBody({ name, providerID: "k3s://worker-2" }) });
      assert.notEqual(anew.metadata?.uid, judged.metadata?.uid);
      await teardown.deleteNode(name, judged.metadata?.uid ?? "");
      assert.equal((await core.readNode({ name })).metadata?.uid, anew.metadata?.uid, `${name} registered anew is still there`);
      await teardown.deleteNode(name, anew.metadata?.uid ?? "");
      assert.equal(await exists(() => core.readNode({ name })), false);
    }
  });

  it("refuses to delete a Node without a uid to delete it under", async () => {
    await assert.rejects(teardown.deleteNode("worker-1", ""), coded("internal", /deleting Node "worker-1": no uid/));
  });

  it("has the power-off pod admitted in the example namespace", async () => {
    const [example] = exampleManifest("namespace.yaml");
    const exampleNamespace = example?.metadata?.name ?? "";
    await createNamespace(core, exampleNamespace);
    const inExample = createKubernetesNodeTeardown(plane.admin(), { namespace: exampleNamespace, image, machines });
    await inExample.createPowerOffPod(worker2, "worker-2", 1);
    assert.equal(await exists(() => core.readNamespacedPod({ name: "plugpool-power-off-worker-2", namespace: exampleNamespace })), true);
  });

  it("reports a refused power-off pod with the namespace, the apiserver's reason and the namespace label to set", async () => {
    const locked = createKubernetesNodeTeardown(plane.admin(), { namespace: "locked", image, machines });
    await assert.rejects(
      locked.createPowerOffPod(worker2, "worker-2", 1),
      coded("cluster-refused", /namespace "locked".*violates PodSecurity "restricted.*pod-security\.kubernetes\.io\/enforce=privileged/s),
    );
  });

  it("stops a call when its signal aborts, and says so", async () => {
    await assert.rejects(
      teardown.markPowerOff("worker-1", { startedAt: 1, pending: false }, { signal: AbortSignal.abort(new Error("deadline")) }),
      coded("cancelled", /recording the power-off on Node "worker-1" ended before it finished: deadline/),
    );
  });

  it("reports an apiserver it cannot reach as a refusal that says so", async () => {
    const unreachable = plane.admin();
    const cluster = unreachable.getCurrentCluster();
    assert.ok(cluster !== null);
    // Port 1 on loopback: nothing listens there.
    unreachable.clusters = unreachable.clusters.map((c) => (c.name === cluster.name ? { ...c, server: "https://127.0.0.1:1" } : c));
    const nowhere = createKubernetesNodeTeardown(unreachable, { namespace, image, machines });
    await assert.rejects(nowhere.deleteNode("worker-1", "a-uid"), coded("cluster-refused", /deleting Node "worker-1" failed, the apiserver did not answer/));
  });
});
