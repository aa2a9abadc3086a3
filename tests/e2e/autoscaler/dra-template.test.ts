// DRA devices in the template against a cluster-autoscaler that predates them: CA 1.36 has no
// ResourceSlices in externalgrpc templates, so plugpool's `resourceSliceBytes` (field 3) must be ignored by it,
// and scale-up from zero must work as before.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { fromBinary } from "@bufbuild/protobuf";
import { NodeSchema } from "../../../gen/k8s.io/api/core/v1/generated_pb.ts";
import { ResourceSliceSchema } from "../../../gen/k8s.io/api/resource/v1/generated_pb.ts";
import type { DeviceSlice } from "../../../src/domain/model.ts";
import { eventually } from "../../support/eventually.ts";
import { startEnvironment, type Environment } from "./environment.ts";
import { createPoolPod, readPod, scenario } from "./scenario.ts";
import { autoscalerMissing } from "../../support/autoscaler/autoscaler.ts";

const gpuSlice: DeviceSlice = {
  driver: "gpu.example.com",
  pool: { name: "worker-1", generation: 1, resourceSliceCount: 1 },
  nodeName: "worker-1",
  devices: [{ name: "gpu-0", attributes: { model: { string: "A100" } }, capacity: { memory: "80Gi" } }],
};

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/support/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: DRA slices in the template", { skip: autoscalerMissing() }, () => {
  let env: Environment;
  const diagnostics = (): string => env.diagnostics();

  before(async () => {
    env = await startEnvironment({
      machines: [{ name: "worker-1" }, { name: "worker-2" }],
      templateSlices: { "worker-1": [gpuSlice] },
    });
  });
  after(async () => {
    await env.stop();
  });

  it("sends resourceSliceBytes with the template, and CA 1.36 still scales up from zero", scenario("DRA template, older CA", diagnostics, async () => {
    let node = "";
    let slices: Uint8Array[] = [];
    await eventually("the template with its slices", async () => {
      const { response, error } = await env.client.call("nodeGroupTemplateNodeInfo", { id: "workers" });
      assert.equal(error, undefined);
      node = fromBinary(NodeSchema, response?.nodeBytes ?? new Uint8Array()).metadata?.name ?? "";
      slices = response?.resourceSliceBytes ?? [];
      assert.equal(slices.length, 1);
    });
    const { spec } = fromBinary(ResourceSliceSchema, slices[0] ?? new Uint8Array());
    assert.ok(spec !== undefined);
    assert.equal(spec.driver, "gpu.example.com");
    assert.equal(spec.nodeName, node, "node-local to the template node");
    assert.deepEqual(spec.devices.map((d) => d.name), ["gpu-0"]);

    await createPoolPod(env.core, "from-zero");
    await eventually("the pod Running on worker-1", async () => {
      const pod = await readPod(env.core, "from-zero");
      assert.equal(pod.status?.phase, "Running");
      assert.equal(pod.spec?.nodeName, "worker-1");
    }, 60_000, 250);
    // With no node in the group, CA built its scale-up on plugpool's template: it asked for it and took it.
    const served = env.served();
    assert.ok(served !== undefined);
    const metrics = await (await fetch(`http://127.0.0.1:${served.opsPort}/metrics`)).text();
    const asked = /plugpool_rpc_duration_seconds_count\{method="NodeGroupTemplateNodeInfo",code="ok"\} (\d+)/.exec(metrics);
    assert.ok(Number(asked?.[1] ?? 0) >= 2, "CA called NodeGroupTemplateNodeInfo (beside this test's own call)");
    assert.deepEqual(env.caLog(/^E.*[Tt]emplate/), [], "no template errors");
    assert.equal(env.caLog(/Scale-up: setting group workers size to 1/).length, 1);
  }));
});
