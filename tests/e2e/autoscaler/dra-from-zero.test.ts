// GPUs from zero. A pool of two GPU machines, each up once (its DRA driver published a ResourceSlice, which
// plugpool recorded) and off again, and pods that ask for a GPU through a ResourceClaim. plugpool sends the recorded
// slices with the group's template, in field 3 of NodeGroupTemplateNodeInfoResponse (resourceSliceBytes).
// cluster-autoscaler 1.36.1 as released ignores that field, so such a pod stays Pending; the same CA with
// tests/harness/autoscaler/dra-template.patch reads it, as https://github.com/kubernetes/autoscaler/pull/10303
// proposes, and scales the pool up from zero, and the scheduler binds the pod to the new machine's GPU.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fromBinary } from "@bufbuild/protobuf";
import { ResourceV1Api, type ResourceV1ResourceClaim, type V1Device } from "@kubernetes/client-node";
import { NodeSchema } from "../../../gen/k8s.io/api/core/v1/generated_pb.ts";
import { ResourceSliceSchema, type ResourceSlice } from "../../../gen/k8s.io/api/resource/v1/generated_pb.ts";
import { TEMPLATE_SLICES_CONFIGMAP } from "../../../src/adapters/kubernetes/template-slices.ts";
import { autoscalerMissing, type AutoscalerBuild } from "../../harness/autoscaler/autoscaler.ts";
import { eventually } from "../../harness/eventually.ts";
import { NAMESPACE, startSite, type Site } from "../../harness/site/index.ts";
import { createPoolPod, deleteAllPods, nodeNames, readPod, runPoolPod, scenario, turnOnRequests, warningsAbout } from "./scenario.ts";

const DRIVER = "gpu.example.com";
const MACHINES = ["worker-1", "worker-2"];

/** The one GPU each machine's driver publishes. */
function gpu(driverVersion: string): V1Device {
  return { name: "gpu-0", attributes: { model: { string: "A100" }, driverVersion: { version: driverVersion } }, capacity: { memory: { value: "80Gi" } } };
}

/** A claim for one device of the GPU class, of `model` when given. */
function claim(name: string, model?: string): ResourceV1ResourceClaim {
  const selectors = model === undefined ? [] : [{ cel: { expression: `device.attributes["${DRIVER}"].model == "${model}"` } }];
  return { metadata: { name }, spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: DRIVER, selectors } }] } } };
}

/** The two machines, off, with the class of their GPUs in the cluster, and CA of `build` beside plugpool. */
async function startGpuPool(build: AutoscalerBuild): Promise<{ site: Site; resource: ResourceV1Api }> {
  const site = await startSite({
    machines: MACHINES.map((name) => ({ name, dra: { driver: DRIVER, devices: [gpu("580.82.7")] } })),
    autoscalerBuild: build,
  });
  const resource = site.plane.admin().makeApiClient(ResourceV1Api);
  await resource.createDeviceClass({
    body: { metadata: { name: DRIVER }, spec: { selectors: [{ cel: { expression: `device.driver == "${DRIVER}"` } }] } },
  });
  return { site, resource };
}

/**
 * Each machine up once and off again, as a pool's machines are after a day's work: two pods of 3 CPU bring both
 * up, their drivers publish their slices and plugpool records them; once the pods are gone, CA scales the pool down
 * to zero, plugpool powers the machines off and deletes their Nodes, and the garbage collector their slices. They
 * are up for well under a minute, so CA builds no template of its own from their Nodes (it keeps one of a Node Ready
 * for a minute: https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/processors/nodeinfosprovider/mixed_nodeinfos_processor.go):
 * a scale-up from zero afterwards rests on plugpool's template alone.
 */
async function upOnce(site: Site, resource: ResourceV1Api): Promise<void> {
  for (const n of [1, 2]) await createPoolPod(site.core, `day-${n}`, { cpu: "3" });
  await eventually("both machines up, each running a pod", async () => {
    const nodes = await Promise.all([1, 2].map(async (n) => (await readPod(site.core, `day-${n}`)).spec?.nodeName));
    assert.deepEqual(nodes.toSorted(), MACHINES);
  }, 60_000, 250);
  await eventually("both machines' devices recorded by plugpool", async () => {
    const stored = await site.core.readNamespacedConfigMap({ namespace: NAMESPACE, name: TEMPLATE_SLICES_CONFIGMAP });
    assert.deepEqual(Object.keys(stored.data ?? {}).toSorted(), MACHINES);
  }, 30_000, 250);
  await deleteAllPods(site.core);
  await eventually("both machines off, their Nodes and slices gone", async () => {
    for (const m of MACHINES) assert.equal(site.powered(m), false, m);
    assert.deepEqual(await nodeNames(site.core), []);
    assert.deepEqual((await resource.listResourceSlice()).items.map((s) => s.metadata?.name), []);
  }, 90_000, 250);
}

/** The messages of CA's NotTriggerScaleUp Events about the pod. */
async function notTriggered(site: Site, pod: string): Promise<string[]> {
  const { items } = await site.core.listNamespacedEvent({ namespace: "default", fieldSelector: `involvedObject.name=${pod},reason=NotTriggerScaleUp` });
  return items.map((e) => e.message ?? "");
}

/** Every switch-on request so far, over both machines' plugs. */
const switchOns = (site: Site): number => MACHINES.reduce((sum, m) => sum + turnOnRequests(site.plug(m)).length, 0);

/**
 * Creates `pod` with `claimName`, waits for CA to say the pod triggers no scale-up, and three CA loops more; then
 * the pool is still at zero: no plug switched on, target size 0, the pod unbound. Resolves with CA's reason.
 */
async function assertNoScaleUp(site: Site, pod: string, claimName: string): Promise<string> {
  const before = { switchOns: switchOns(site), scaleUps: site.caLog(/Scale-up: setting group/).length };
  await createPoolPod(site.core, pod, { claim: claimName });
  let reasons: string[] = [];
  await eventually(`CA's NotTriggerScaleUp for ${pod}`, async () => {
    reasons = await notTriggered(site, pod);
    assert.notDeepEqual(reasons, []);
  }, 30_000, 250);
  const loops = (): number => site.caLog(/Autoscaler loop triggered/).length;
  const loopsBefore = loops();
  await eventually("three more CA loops", () => {
    assert.ok(loops() >= loopsBefore + 3, `${loops() - loopsBefore} loops`);
  }, 30_000, 250);
  assert.equal(switchOns(site), before.switchOns, "no plug switched on");
  assert.equal(site.caLog(/Scale-up: setting group/).length, before.scaleUps);
  const target = await site.client.call("nodeGroupTargetSize", { id: "workers" });
  assert.equal(target.response?.targetSize, 0);
  const waiting = await readPod(site.core, pod);
  assert.equal(waiting.status?.phase, "Pending");
  assert.equal(waiting.spec?.nodeName, undefined);
  return reasons.join("; ");
}

/** Waits until `pod` runs on `node` with its claim's GPU allocated there, reserved for it. */
async function assertBoundToGpu(site: Site, resource: ResourceV1Api, pod: string, claimName: string, node: string): Promise<void> {
  await eventually(`${pod} Running on ${node}, its claim allocated there`, async () => {
    const bound = await readPod(site.core, pod);
    assert.equal(bound.spec?.nodeName, node);
    assert.equal(bound.status?.phase, "Running");
    const { status } = await resource.readNamespacedResourceClaim({ namespace: "default", name: claimName });
    assert.deepEqual(
      status?.allocation?.devices?.results?.map((r) => ({ driver: r.driver, pool: r.pool, device: r.device })),
      [{ driver: DRIVER, pool: node, device: "gpu-0" }],
    );
    assert.deepEqual(status.reservedFor?.map((r) => r.uid), [bound.metadata?.uid]);
  }, 60_000, 250);
}

/** The template plugpool answers with now: its Node's name and its ResourceSlices. */
async function template(site: Site): Promise<{ node: string; slices: ResourceSlice[] }> {
  const { response, error } = await site.client.call("nodeGroupTemplateNodeInfo", { id: "workers" });
  assert.equal(error, undefined);
  return {
    node: fromBinary(NodeSchema, response?.nodeBytes ?? new Uint8Array()).metadata?.name ?? "",
    slices: (response?.resourceSliceBytes ?? []).map((bytes) => fromBinary(ResourceSliceSchema, bytes)),
  };
}

/** A pool started with CA of `build` before the suite's tests, each machine up once, and stopped after them. */
function useGpuPool(build: AutoscalerBuild): { pool: { site: Site; resource: ResourceV1Api }; diagnostics: () => string } {
  const pool = {} as { site: Site; resource: ResourceV1Api };
  before(async () => {
    Object.assign(pool, await startGpuPool(build));
    await upOnce(pool.site, pool.resource);
  });
  after(async () => {
    await pool.site.stop();
  });
  return { pool, diagnostics: () => pool.site.diagnostics() };
}

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("GPUs from zero with cluster-autoscaler 1.36.1 as released", { skip: autoscalerMissing("release") }, () => {
  const { pool, diagnostics } = useGpuPool("release");

  it("sends the devices worker-1 published with the template, node-local to the template node", scenario("DRA template", diagnostics, async () => {
    const { node, slices } = await template(pool.site);
    assert.equal(slices.length, 1);
    const spec = slices[0]?.spec;
    assert.ok(spec !== undefined);
    assert.equal(spec.driver, DRIVER);
    assert.equal(spec.nodeName, node);
    assert.equal(spec.pool?.name, node, "the pool named for worker-1 renamed with it");
    assert.deepEqual(spec.devices.map((d) => [d.name, d.attributes.model?.string]), [["gpu-0", "A100"]]);
  }));

  it("leaves a pod whose ResourceClaim asks for a GPU Pending: no scale-up from zero", scenario("claim, CA as released", diagnostics, async () => {
    await pool.resource.createNamespacedResourceClaim({ namespace: "default", body: claim("gpu") });
    const reason = await assertNoScaleUp(pool.site, "gpu-pod", "gpu");
    assert.match(reason, /claim/, "what the template lacks is the claim's device");
    assert.deepEqual(pool.site.caLog(/^E.*[Tt]emplate/), [], "CA took the template, field 3 and all");
  }));

  it("scales up from zero for a pod without a claim; the claim's pod then runs on that machine's GPU", scenario("no claim, CA as released", diagnostics, async () => {
    assert.equal(await runPoolPod(pool.site.core, "no-claim"), "worker-1");
    await assertBoundToGpu(pool.site, pool.resource, "gpu-pod", "gpu", "worker-1");
  }));
});

describe("GPUs from zero with cluster-autoscaler 1.36.1 and dra-template.patch", { skip: autoscalerMissing("dra-template") }, () => {
  const { pool, diagnostics } = useGpuPool("dra-template");

  it("leaves the pool at zero for a pod whose claim asks for a GPU no machine has", scenario("claim no machine meets", diagnostics, async () => {
    await pool.resource.createNamespacedResourceClaim({ namespace: "default", body: claim("h100", "H100") });
    const reason = await assertNoScaleUp(pool.site, "h100-pod", "h100");
    assert.match(reason, /claim/);
  }));

  it("scales the pool up from zero for a pod whose claim asks for a GPU, and the scheduler binds it to the machine's GPU", scenario("claim, patched CA", diagnostics, async () => {
    const scaleUps = pool.site.caLog(/Scale-up: setting group workers size to 1/).length;
    await pool.resource.createNamespacedResourceClaim({ namespace: "default", body: claim("gpu") });
    await createPoolPod(pool.site.core, "gpu-pod", { claim: "gpu" });
    await assertBoundToGpu(pool.site, pool.resource, "gpu-pod", "gpu", "worker-1");
    assert.equal(pool.site.caLog(/Scale-up: setting group workers size to 1/).length, scaleUps + 1);
    assert.equal(pool.site.powered("worker-2"), false, "one GPU asked for, one machine on");
    assert.equal((await readPod(pool.site.core, "h100-pod")).spec?.nodeName, undefined);
  }));

  it("warns, in its log and on worker-1's Node, once the pool's machines publish different devices", scenario("devices differ", diagnostics, async () => {
    const differ = (): readonly Record<string, unknown>[] => pool.site.plugpool.events("template-slices-differ");
    assert.deepEqual(differ(), [], "alike so far");
    // worker-1's driver is upgraded; worker-2, off, is remembered with the devices of the older one.
    pool.site.machines.publishDevices("worker-1", [gpu("590.10.1")]);
    await eventually("the template with worker-1's new devices", async () => {
      const { slices } = await template(pool.site);
      assert.equal(slices[0]?.spec?.devices[0]?.attributes.driverVersion?.version, "590.10.1");
    }, 30_000, 250);
    assert.deepEqual(differ().map((e) => [e.machine, e.differing]), [["worker-1", JSON.stringify(["worker-2"])]]);
    const logged = readFileSync(pool.site.plugpool.logPath, "utf8").split("\n").filter((l) => l.includes('"event":"template-slices-differ"'));
    assert.deepEqual(logged.map((l) => (JSON.parse(l) as { level: string }).level), ["warn"]);
    await eventually("the TemplateSlicesDiffer Warning on worker-1", async () => {
      const [warning] = await warningsAbout(pool.site.core, "TemplateSlicesDiffer", "worker-1");
      assert.match(warning?.message ?? "", /worker-2/);
    }, 10_000, 250);
  }));
});
