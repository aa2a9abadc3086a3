// The DRA devices of each machine as the view remembers them: the last non-empty set a
// machine published, kept in ConfigMap plugpool-template-slices across power-offs and restarts.
import { CoreV1Api, PatchStrategy, ResourceV1Api, setHeaderOptions, type V1ResourceSlice } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createKubernetesClusterView, type KubernetesClusterView } from "../../../src/adapters/kubernetes/cluster-view.ts";
import { TEMPLATE_SLICES_CONFIGMAP } from "../../../src/adapters/kubernetes/template-slices.ts";
import type { DeviceSlice } from "../../../src/domain/model.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { createNamespace, eventually, fastRetry, machine } from "./support.ts";

const namespace = "plugpool";
const machines = [machine("worker-1"), machine("worker-2", 1)];

function sliceBody(name: string, nodeName: string, driver: string, memory: string): V1ResourceSlice {
  return {
    metadata: { name },
    spec: {
      driver,
      nodeName,
      pool: { name: nodeName, generation: 1, resourceSliceCount: 1 },
      devices: [{
        name: "gpu-0",
        attributes: {
          model: { string: "L4" },
          index: { _int: 0 },
          healthy: { bool: true },
          driverVersion: { version: "570.1.0" },
        },
        capacity: { memory: { value: memory } },
      }],
    },
  };
}

function expected(nodeName: string, driver: string, memory: string): DeviceSlice {
  return {
    driver,
    nodeName,
    pool: { name: nodeName, generation: 1, resourceSliceCount: 1 },
    devices: [{
      name: "gpu-0",
      attributes: { model: { string: "L4" }, index: { int: 0 }, healthy: { bool: true }, driverVersion: { version: "570.1.0" } },
      capacity: { memory },
    }],
  };
}

describe("template slices of the Kubernetes cluster view", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  let resource: ResourceV1Api;
  let view: KubernetesClusterView;

  const startView = async (): Promise<KubernetesClusterView> => {
    const started = createKubernetesClusterView(plane.admin(), { powerOffNamespace: namespace, machines, retry: fastRetry });
    started.start();
    await started.whenSynced(AbortSignal.timeout(20_000));
    return started;
  };
  const stored = async (): Promise<Record<string, string>> =>
    (await core.readNamespacedConfigMap({ name: TEMPLATE_SLICES_CONFIGMAP, namespace })).data ?? {};

  before(async () => {
    plane = await startControlPlane();
    core = plane.admin().makeApiClient(CoreV1Api);
    resource = plane.admin().makeApiClient(ResourceV1Api);
    await createNamespace(core, namespace);
    view = await startView();
  });
  after(async () => {
    await view.stop();
    await plane.stop();
  });

  it("serves the slices a machine publishes and stores them in the ConfigMap", async () => {
    await resource.createResourceSlice({ body: sliceBody("w1-gpu", "worker-1", "gpu.example.com", "24Gi") });
    const shown = await eventually("worker-1's slices", () => view.templateSlices("worker-1"));
    assert.deepEqual(shown, [expected("worker-1", "gpu.example.com", "24Gi")]);
    await view.templateSlicesStored();
    const data = await stored();
    assert.deepEqual(JSON.parse(data["worker-1"] ?? "null"), [expected("worker-1", "gpu.example.com", "24Gi")]);
  });

  it("reads slices it lists at start the same as those its watch brings", async () => {
    // A namespace without the ConfigMap: what this view shows can only come from its list.
    await createNamespace(core, "elsewhere");
    const late = createKubernetesClusterView(plane.admin(), { powerOffNamespace: "elsewhere", machines });
    late.start();
    await late.whenSynced(AbortSignal.timeout(20_000));
    assert.deepEqual(late.templateSlices("worker-1"), view.templateSlices("worker-1"));
    await late.templateSlicesStored();
    await late.stop();
  });

  it("ignores the slices of nodes that are not configured machines", async () => {
    await resource.createResourceSlice({ body: sliceBody("stranger-gpu", "stranger", "gpu.example.com", "24Gi") });
    // Watch events arrive in order: once worker-2's slice shows, the stranger's was seen before it.
    await resource.createResourceSlice({ body: sliceBody("w2-gpu", "worker-2", "gpu.example.com", "48Gi") });
    await eventually("worker-2's slices", () => view.templateSlices("worker-2"));
    assert.equal(view.templateSlices("stranger"), undefined);
    await view.templateSlicesStored();
    assert.deepEqual(Object.keys(await stored()).sort(), ["worker-1", "worker-2"]);
  });

  it("keeps the last non-empty set when the machine's slices go away", async () => {
    await resource.deleteResourceSlice({ name: "w1-gpu" });
    await resource.createResourceSlice({ body: sliceBody("marker", "worker-2", "other.example.com", "1") });
    await eventually("the marker slice", () => view.templateSlices("worker-2")?.length === 2);
    assert.deepEqual(view.templateSlices("worker-1"), [expected("worker-1", "gpu.example.com", "24Gi")]);
  });

  it("orders a machine's slices by driver and pool", () => {
    assert.deepEqual(view.templateSlices("worker-2")?.map((s) => s.driver), ["gpu.example.com", "other.example.com"]);
  });

  it("loads the stored sets at start, so they survive a restart of plugpool", async () => {
    await view.templateSlicesStored();
    await view.stop();
    await resource.deleteCollectionResourceSlice({});
    view = await startView();
    assert.deepEqual(view.templateSlices("worker-1"), [expected("worker-1", "gpu.example.com", "24Gi")]);
    assert.equal(view.templateSlices("worker-2")?.length, 2);
  });

  it("replaces a stored set when the machine publishes another, keeping the other machines' keys", async () => {
    const before = await stored();
    await resource.createResourceSlice({ body: sliceBody("w1-gpu-new", "worker-1", "gpu.example.com", "80Gi") });
    await eventually("worker-1's new slices", () => view.templateSlices("worker-1")?.[0]?.devices[0]?.capacity.memory === "80Gi");
    await view.templateSlicesStored();
    const after = await stored();
    assert.deepEqual(JSON.parse(after["worker-1"] ?? "null"), [expected("worker-1", "gpu.example.com", "80Gi")]);
    assert.equal(after["worker-2"], before["worker-2"]);
  });

  it("ignores stored keys of unconfigured machines and unreadable values", async () => {
    await view.stop();
    await core.patchNamespacedConfigMap(
      { name: TEMPLATE_SLICES_CONFIGMAP, namespace, body: [{ op: "add", path: "/data/retired", value: "[]" }, { op: "replace", path: "/data/worker-2", value: "{not json" }] },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    );
    const errors: unknown[] = [];
    const fresh = createKubernetesClusterView(plane.admin(), { powerOffNamespace: namespace, machines, onError: (e) => errors.push(e) });
    fresh.start();
    await fresh.whenSynced(AbortSignal.timeout(20_000));
    assert.equal(fresh.templateSlices("retired"), undefined);
    assert.equal(fresh.templateSlices("worker-2"), undefined);
    assert.ok(errors.some((e) => /worker-2/.test(String(e))), "the unreadable value is reported");
    assert.deepEqual(fresh.templateSlices("worker-1"), [expected("worker-1", "gpu.example.com", "80Gi")]);
    view = fresh;
  });
});
