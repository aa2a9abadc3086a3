import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { DeviceSlice } from "../../src/domain/index.ts";
import { TEMPLATE, World } from "../harness/fakes/world.ts";
import { throwsWith } from "../harness/fakes/assertions.ts";

function slice(node: string, pool: string, devices: string[], model = "A100"): DeviceSlice {
  return {
    driver: "gpu.example.com",
    pool: { name: pool, generation: 3, resourceSliceCount: 9 },
    nodeName: node,
    devices: devices.map((name) => ({ name, attributes: { model: { string: model } }, capacity: {} })),
  };
}

describe("Pool.template()", () => {
  it("builds a Ready template Node named for the group from the group template", () => {
    const w = new World({
      groups: [
        {
          id: "gpu",
          machines: ["g-1"],
          template: {
            ...TEMPLATE,
            resources: { "nvidia.com/gpu": "2" },
            labels: { "example.com/pool": "gpu", "kubernetes.io/os": "plan9" },
            taints: [{ key: "gpu", value: "true", effect: "NoSchedule" }],
          },
        },
      ],
    });
    const { node, slices } = w.pool.template("gpu");
    assert.equal(node.name, "template-node-for-gpu");
    assert.deepEqual(node.labels, {
      "kubernetes.io/arch": "amd64",
      "kubernetes.io/os": "plan9",
      "kubernetes.io/hostname": "template-node-for-gpu",
      "node.kubernetes.io/instance-type": "plugpool.gpu",
      "example.com/pool": "gpu",
    });
    const resources = { cpu: "24", memory: "64Gi", pods: "110", "nvidia.com/gpu": "2" };
    assert.deepEqual(node.capacity, resources);
    assert.deepEqual(node.allocatable, resources);
    assert.deepEqual(node.taints, [{ key: "gpu", value: "true", effect: "NoSchedule" }]);
    assert.deepEqual(
      node.conditions.map((c) => `${c.type}=${c.status}`),
      ["Ready=True", "MemoryPressure=False", "DiskPressure=False", "PIDPressure=False", "NetworkUnavailable=False"],
    );
    assert.deepEqual(slices, []);
  });

  it("claims kubernetes.io/arch amd64 and kubernetes.io/os linux unless the group's labels name others", () => {
    const w = new World({
      groups: [
        { id: "x86", machines: ["x-1"], template: TEMPLATE },
        { id: "arm", machines: ["a-1"], template: { ...TEMPLATE, labels: { "kubernetes.io/arch": "arm64" } } },
      ],
    });
    const arch = (group: string) => {
      const { labels } = w.pool.template(group).node;
      return [labels["kubernetes.io/arch"], labels["kubernetes.io/os"]];
    };
    assert.deepEqual(arch("x86"), ["amd64", "linux"]);
    assert.deepEqual(arch("arm"), ["arm64", "linux"]);
  });

  it("uses the slices of the first machine in config order that has some, renamed to the template node", () => {
    const w = new World();
    w.cluster.setSlices("worker-1", []);
    w.cluster.setSlices("worker-2", [
      slice("worker-2", "worker-2-gpus", ["gpu-0"]),
      slice("worker-2", "worker-2-gpus", ["gpu-1"]),
      slice("worker-2", "shared", ["nic-0"]),
    ]);
    w.cluster.setSlices("worker-3", [slice("worker-3", "worker-3-gpus", ["gpu-0", "gpu-1"])]);
    const { slices } = w.pool.template("workers");
    assert.deepEqual(
      slices.map((s) => [s.nodeName, s.pool.name, s.pool.resourceSliceCount, s.pool.generation]),
      [
        ["template-node-for-workers", "template-node-for-workers-gpus", 2, 3],
        ["template-node-for-workers", "template-node-for-workers-gpus", 2, 3],
        ["template-node-for-workers", "shared", 1, 3],
      ],
    );
  });

  it("reports once per change when machines of a group publish different devices", () => {
    const w = new World();
    w.cluster.setSlices("worker-1", [slice("worker-1", "p", ["gpu-0"])]);
    w.cluster.setSlices("worker-2", [slice("worker-2", "p", ["gpu-0"])]);
    w.pool.template("workers");
    assert.equal(w.reporter.of("template-slices-differ").length, 0);
    w.cluster.setSlices("worker-3", [slice("worker-3", "p", ["gpu-0"], "H100")]);
    w.pool.template("workers");
    w.pool.template("workers");
    assert.deepEqual(
      w.reporter.of("template-slices-differ").map((e) => [e.machine, e.differing]),
      [["worker-1", ["worker-3"]]],
    );
    w.cluster.setSlices("worker-2", [slice("worker-2", "p", ["gpu-0", "gpu-1"])]);
    w.pool.template("workers");
    assert.deepEqual(w.reporter.of("template-slices-differ")[1]?.differing, ["worker-2", "worker-3"]);
  });

  it("rejects an unknown group", () => {
    const w = new World();
    throwsWith(() => w.pool.template("nope"), "node-group-not-found");
  });
});
