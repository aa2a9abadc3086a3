// The example RBAC (deploy/examples/rbac.yaml) against a real kube-apiserver: as its ServiceAccount,
// every operation plugpool makes works, cluster-autoscaler gets what it uses, and a sample of what
// neither needs is denied.
import { ApiException, AuthorizationV1Api, CoordinationV1Api, CoreV1Api, ResourceV1Api, type KubeConfig, type V1ResourceAttributes } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { requiredAccess } from "../../../src/adapters/kubernetes/access.ts";
import { createKubernetesClusterView } from "../../../src/adapters/kubernetes/cluster-view.ts";
import { createKubernetesEventRecorder } from "../../../src/adapters/kubernetes/events.ts";
import { createKubernetesNodeLookup } from "../../../src/adapters/kubernetes/node-lookup.ts";
import { createKubernetesNodeTeardown } from "../../../src/adapters/kubernetes/node-teardown.ts";
import { createLeaderLease } from "../../../src/adapters/kubernetes/leader-lease.ts";
import { createKubernetesPowerRecords, POWER_RECORDS_CONFIGMAP } from "../../../src/adapters/kubernetes/power-records.ts";
import { TEMPLATE_SLICES_CONFIGMAP } from "../../../src/adapters/kubernetes/template-slices.ts";
import { POWER_OFF_ANNOTATION } from "../../../src/domain/model.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { apply, createNamespace, eventually, exampleManifest, fastRetry, machine, nodeBody } from "./support.ts";

const namespace = "plugpool";
const serviceAccount = "cluster-autoscaler";
const worker1 = machine("worker-1");
const machines = [worker1, machine("worker-2", 1)];

type Attributes = Pick<V1ResourceAttributes, "verb" | "group" | "resource" | "subresource" | "namespace" | "name">;

function describeAttributes(a: Attributes): string {
  const resource = `${a.group === undefined || a.group === "" ? "" : `${a.group}/`}${a.resource ?? ""}${a.subresource === undefined ? "" : `/${a.subresource}`}`;
  return `${a.verb ?? ""} ${resource}${a.name === undefined ? "" : ` ${a.name}`}${a.namespace === undefined ? " (cluster)" : ` in ${a.namespace}`}`;
}

const forbidden = (error: unknown): boolean => error instanceof ApiException && (error as ApiException<unknown>).code === 403;

describe("deploy/examples/rbac.yaml", () => {
  let plane: ControlPlane;
  let admin: KubeConfig;
  let core: CoreV1Api;
  let asServiceAccount: KubeConfig;

  /** Whether the example ServiceAccount may do `attributes`, as the apiserver's authorizer answers. */
  const allowed = async (attributes: Attributes): Promise<boolean> => {
    const review = await admin.makeApiClient(AuthorizationV1Api).createSubjectAccessReview({
      body: {
        spec: {
          user: `system:serviceaccount:${namespace}:${serviceAccount}`,
          groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
          resourceAttributes: attributes,
        },
      },
    });
    return review.status?.allowed === true;
  };

  before(async () => {
    plane = await startControlPlane();
    admin = plane.admin();
    core = admin.makeApiClient(CoreV1Api);
    await apply(admin, [...exampleManifest("namespace.yaml"), ...exampleManifest("rbac.yaml")]);
    await createNamespace(core, namespace);
    await createNamespace(core, "other");
    asServiceAccount = await plane.asServiceAccount(namespace, serviceAccount);
  });
  after(async () => {
    await plane.stop();
  });

  it("lets plugpool sync its view and store template slices", async () => {
    const errors: unknown[] = [];
    const view = createKubernetesClusterView(asServiceAccount, {
      powerOffNamespace: namespace, machines, retry: fastRetry, onError: (error) => errors.push(error),
    });
    view.start();
    try {
      await view.whenSynced(AbortSignal.timeout(20_000));
      await admin.makeApiClient(ResourceV1Api).createResourceSlice({
        body: { metadata: { name: "w1" }, spec: { driver: "gpu.example.com", nodeName: "worker-1", pool: { name: "w1", generation: 1, resourceSliceCount: 1 }, devices: [{ name: "gpu-0" }] } },
      });
      await eventually("worker-1's slices", () => view.templateSlices("worker-1"));
      await view.templateSlicesStored();
      const stored = await core.readNamespacedConfigMap({ name: TEMPLATE_SLICES_CONFIGMAP, namespace });
      assert.ok(stored.data?.["worker-1"] !== undefined);
      assert.deepEqual(errors, []);
    } finally {
      await view.stop();
    }
  });

  it("lets plugpool mark a Node, create and delete its power-off pod, and delete the Node", async () => {
    await core.createNode({ body: nodeBody({ name: "worker-1", providerID: "k3s://worker-1" }) });
    const teardown = createKubernetesNodeTeardown(asServiceAccount, {
      namespace, image: "busybox:1.37.0", machines, providerIDPrefix: "k3s://",
    });
    await teardown.markPowerOff("worker-1", { startedAt: 1_700_000_000_000, pending: false });
    assert.equal((await core.readNode({ name: "worker-1" })).metadata?.annotations?.[POWER_OFF_ANNOTATION], "1700000000000");
    await teardown.clearPowerOffMark("worker-1");
    await teardown.createPowerOffPod(worker1, "worker-1", 1_700_000_000_000);
    assert.equal(await teardown.deletePowerOffPod(worker1), true);
    await teardown.deleteNode("worker-1", (await core.readNode({ name: "worker-1" })).metadata?.uid ?? "");
    await assert.rejects(core.readNode({ name: "worker-1" }), (error: unknown) => error instanceof ApiException && error.code === 404);
  });

  it("lets plugpool read the Nodes that claim a machine", async () => {
    await core.createNode({ body: nodeBody({ name: "worker-2.lan", providerID: "k3s://worker-2" }) });
    const claiming = await createKubernetesNodeLookup(asServiceAccount).nodesClaiming("worker-2", "k3s://worker-2");
    assert.deepEqual(claiming.map((n) => n.name), ["worker-2.lan"]);
  });

  it("lets plugpool keep its power records: load, create, patch", async () => {
    const errors: unknown[] = [];
    const options = { namespace, machines, retry: fastRetry, onError: (error: unknown) => errors.push(error) };
    const records = createKubernetesPowerRecords(asServiceAccount, options);
    await records.load();
    await records.recordPowerOn("worker-1", { at: 1, why: "scale-up" });
    records.setQuarantine("worker-2", { until: 2, failures: 1 });
    records.endPowerOn("worker-1");
    await records.flushed();
    const restarted = createKubernetesPowerRecords(asServiceAccount, options);
    await restarted.load();
    assert.deepEqual(restarted.quarantine("worker-2"), { until: 2, failures: 1 });
    assert.equal(restarted.powerOn("worker-1"), undefined);
    assert.deepEqual(errors, []);
    const stored = await core.readNamespacedConfigMap({ name: POWER_RECORDS_CONFIGMAP, namespace });
    assert.deepEqual(Object.keys(stored.data ?? {}), ["quarantine.worker-2"]);
  });

  it("lets plugpool take its Lease following cluster-autoscaler's, and give it up", async () => {
    const errors: unknown[] = [];
    const lease = createLeaderLease(asServiceAccount, {
      lease: { namespace, name: "plugpool" },
      identity: "plugpool-0_rbac",
      followAutoscaler: { namespace, name: "cluster-autoscaler", hostname: "plugpool-0" },
      onError: (error) => errors.push(error),
    });
    await lease.start();
    assert.deepEqual(errors, []);
    assert.equal(lease.acting(), true);
    await lease.stop();
    const stored = await admin.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace, name: "plugpool" });
    assert.equal(stored.spec?.holderIdentity, "");
    assert.deepEqual(errors, []);
  });

  it("lets plugpool record Events and count their repeats", async () => {
    const errors: unknown[] = [];
    const recorder = createKubernetesEventRecorder(asServiceAccount, { onError: (error) => errors.push(error) });
    recorder.report({ type: "plug-read-failed", machine: "worker-2", error: "timeout" });
    recorder.report({ type: "plug-read-failed", machine: "worker-2", error: "timeout" });
    await recorder.flushed();
    assert.deepEqual(errors, []);
    const events = await core.listNamespacedEvent({ namespace: "default", fieldSelector: "involvedObject.name=worker-2" });
    assert.deepEqual(events.items.map((e) => e.count), [2]);
  });

  for (const attributes of requiredAccess(namespace)) {
    it(`allows plugpool to ${describeAttributes(attributes)}`, async () => {
      assert.equal(await allowed(attributes), true);
    });
  }

  const caUses: Attributes[] = [
    ...["get", "list", "watch", "update"].map((verb) => ({ verb, resource: "nodes" })),
    ...["namespaces", "pods", "services", "replicationcontrollers", "persistentvolumeclaims", "persistentvolumes"]
      .map((resource) => ({ verb: "watch", resource })),
    ...["daemonsets", "replicasets", "statefulsets"].map((resource) => ({ verb: "list", group: "apps", resource })),
    ...["jobs", "cronjobs"].map((resource) => ({ verb: "watch", group: "batch", resource })),
    { verb: "watch", group: "policy", resource: "poddisruptionbudgets" },
    ...["storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments"]
      .map((resource) => ({ verb: "watch", group: "storage.k8s.io", resource })),
    ...["resourceslices", "resourceclaims", "deviceclasses"].map((resource) => ({ verb: "watch", group: "resource.k8s.io", resource })),
    { verb: "create", resource: "pods", subresource: "eviction", namespace: "other" },
    { verb: "create", resource: "events", namespace: "other" },
    { verb: "patch", resource: "events", namespace: "other" },
    { verb: "create", group: "coordination.k8s.io", resource: "leases", namespace },
    { verb: "update", group: "coordination.k8s.io", resource: "leases", namespace, name: "cluster-autoscaler" },
    { verb: "create", resource: "configmaps", namespace },
    { verb: "delete", resource: "configmaps", namespace, name: "cluster-autoscaler-status" },
    { verb: "update", resource: "configmaps", namespace, name: "cluster-autoscaler-status" },
  ];
  for (const attributes of caUses) {
    it(`allows cluster-autoscaler to ${describeAttributes(attributes)}`, async () => {
      assert.equal(await allowed(attributes), true);
    });
  }

  const neitherNeeds: Attributes[] = [
    { verb: "get", resource: "secrets", namespace },
    { verb: "list", resource: "secrets" },
    { verb: "create", resource: "nodes" },
    { verb: "delete", resource: "pods", namespace: "other" },
    { verb: "create", resource: "pods", namespace: "other" },
    { verb: "patch", resource: "pods", namespace },
    { verb: "update", resource: "configmaps", namespace, name: "other" },
    { verb: "get", resource: "configmaps", namespace, name: "other" },
    { verb: "delete", resource: "configmaps", namespace, name: TEMPLATE_SLICES_CONFIGMAP },
    { verb: "update", resource: "configmaps", namespace, name: TEMPLATE_SLICES_CONFIGMAP },
    { verb: "delete", resource: "configmaps", namespace, name: POWER_RECORDS_CONFIGMAP },
    { verb: "update", resource: "configmaps", namespace, name: POWER_RECORDS_CONFIGMAP },
    { verb: "list", resource: "configmaps", namespace },
    { verb: "update", resource: "configmaps", namespace: "kube-system", name: "cluster-autoscaler-status" },
    { verb: "update", group: "coordination.k8s.io", resource: "leases", namespace, name: "other" },
    { verb: "create", group: "resource.k8s.io", resource: "resourceslices" },
    { verb: "update", group: "apps", resource: "deployments", namespace: "other" },
    { verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace },
  ];
  for (const attributes of neitherNeeds) {
    it(`denies ${describeAttributes(attributes)}`, async () => {
      assert.equal(await allowed(attributes), false);
    });
  }

  it("has the apiserver refuse reading Secrets, writing other ConfigMaps and pods in other namespaces", async () => {
    const sa = asServiceAccount.makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: "someone-elses" }, data: { a: "1" } } });
    await core.createNamespacedPod({ namespace: "other", body: { metadata: { name: "theirs" }, spec: { nodeName: "x", containers: [{ name: "c", image: "busybox:1.37.0" }] } } });
    await assert.rejects(sa.listNamespacedSecret({ namespace }), forbidden);
    await assert.rejects(sa.readNamespacedSecret({ namespace: "default", name: "any" }), forbidden);
    await assert.rejects(sa.replaceNamespacedConfigMap({ namespace, name: "someone-elses", body: { metadata: { name: "someone-elses" }, data: { a: "2" } } }), forbidden);
    await assert.rejects(sa.deleteNamespacedPod({ namespace: "other", name: "theirs" }), forbidden);
    await assert.rejects(
      sa.createNamespacedPod({ namespace: "other", body: { metadata: { name: "mine" }, spec: { nodeName: "x", containers: [{ name: "c", image: "busybox:1.37.0" }] } } }),
      forbidden,
    );
  });
});
