// Encoding the Kubernetes messages plugpool sends inside nodeBytes and resourceSliceBytes: a
// realistic template Node and ResourceSlice survive toBinary/fromBinary unchanged, proto2 presence
// keeps explicit "" and false, and a few encodings match bytes worked out by hand from the wire
// format, so the shape the Go reader sees does not depend on protobuf-es agreeing with itself.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { create, equals, fromBinary, isFieldSet, toBinary } from "@bufbuild/protobuf";
import {
  NodeSchema,
  NodeSelectorRequirementSchema,
  NodeSpecSchema,
  NodeStatusSchema,
} from "../../../../gen/k8s.io/api/core/v1/generated_pb.ts";
import { DeviceAttributeSchema, ResourceSliceSchema } from "../../../../gen/k8s.io/api/resource/v1/generated_pb.ts";
import { ObjectMetaSchema } from "../../../../gen/k8s.io/apimachinery/pkg/apis/meta/v1/generated_pb.ts";

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");

const added = { seconds: 1_767_225_600n };
const resources = { cpu: { string: "24" }, memory: { string: "64Gi" }, pods: { string: "110" } };
const condition = (type: string, status: string) => ({
  type,
  status,
  reason: `Kubelet${type}`,
  message: `${type} is ${status}`,
  lastHeartbeatTime: added,
  lastTransitionTime: added,
});

function templateNode() {
  return create(NodeSchema, {
    metadata: {
      name: "template-workers",
      labels: { "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "example.com/pool": "workers" },
      annotations: { "plugpool.example/group": "workers" },
      creationTimestamp: added,
    },
    spec: {
      providerID: "k3s://template-workers",
      taints: [
        { key: "example.com/gpu", value: "true", effect: "NoSchedule", timeAdded: added },
        { key: "example.com/dedicated", effect: "PreferNoSchedule" },
      ],
    },
    status: {
      capacity: resources,
      allocatable: { ...resources, memory: { string: "63Gi" } },
      conditions: [
        condition("Ready", "True"),
        condition("MemoryPressure", "False"),
        condition("DiskPressure", "False"),
        condition("PIDPressure", "False"),
      ],
      addresses: [{ type: "Hostname", address: "template-workers" }],
      nodeInfo: { operatingSystem: "linux", architecture: "amd64", kubeletVersion: "v1.36.1" },
    },
  });
}

function gpuSlice() {
  return create(ResourceSliceSchema, {
    metadata: {
      name: "worker-1-gpu.example.com-x7k2p",
      ownerReferences: [{ apiVersion: "v1", kind: "Node", name: "worker-1", uid: "7d1c0e5a", controller: true }],
    },
    spec: {
      driver: "gpu.example.com",
      pool: { name: "worker-1", generation: 3n, resourceSliceCount: 1n },
      nodeName: "worker-1",
      devices: [
        {
          name: "gpu-0",
          attributes: {
            index: { int: 0n },
            productName: { string: "Example GPU 24G" },
            driverVersion: { version: "550.54.15" },
            mig: { bool: false },
          },
          capacity: {
            memory: { value: { string: "24Gi" } },
            cores: {
              value: { string: "128" },
              requestPolicy: {
                default: { string: "1" },
                validRange: { min: { string: "1" }, max: { string: "128" }, step: { string: "1" } },
              },
            },
          },
        },
      ],
    },
  });
}

describe("k8s.io.api.core.v1.Node encoding", () => {
  it("decodes a template Node to exactly the Node that was encoded", () => {
    const node = templateNode();
    const bytes = toBinary(NodeSchema, node);
    const decoded = fromBinary(NodeSchema, bytes);
    assert.deepStrictEqual(decoded, node);
    assert.ok(equals(NodeSchema, decoded, node));
    assert.equal(hex(toBinary(NodeSchema, decoded)), hex(bytes));
  });

  it("keeps capacity quantities, taint times and conditions readable after decoding", () => {
    const { spec, status } = fromBinary(NodeSchema, toBinary(NodeSchema, templateNode()));
    assert.ok(spec && status);
    assert.deepEqual(
      Object.entries(status.capacity).map(([k, q]) => [k, q.string]),
      [["cpu", "24"], ["memory", "64Gi"], ["pods", "110"]],
    );
    assert.equal(status.allocatable.memory?.string, "63Gi");
    assert.equal(spec.taints[0]?.timeAdded?.seconds, 1_767_225_600n);
    assert.equal(spec.taints[1]?.timeAdded, undefined);
    assert.deepEqual(status.conditions.map((c) => [c.type, c.status]), [
      ["Ready", "True"], ["MemoryPressure", "False"], ["DiskPressure", "False"], ["PIDPressure", "False"],
    ]);
  });
});

describe("k8s.io.api.resource.v1.ResourceSlice encoding", () => {
  it("decodes a node-local slice to exactly the slice that was encoded", () => {
    const slice = gpuSlice();
    const bytes = toBinary(ResourceSliceSchema, slice);
    const decoded = fromBinary(ResourceSliceSchema, bytes);
    assert.deepStrictEqual(decoded, slice);
    assert.ok(equals(ResourceSliceSchema, decoded, slice));
    assert.equal(hex(toBinary(ResourceSliceSchema, decoded)), hex(bytes));
  });

  it("keeps int, bool, string and version attributes and capacity after decoding", () => {
    const { spec } = fromBinary(ResourceSliceSchema, toBinary(ResourceSliceSchema, gpuSlice()));
    const device = spec?.devices[0];
    assert.ok(spec && device);
    assert.equal(spec.pool?.resourceSliceCount, 1n);
    assert.equal(spec.nodeName, "worker-1");
    assert.equal(device.attributes.index?.int, 0n);
    assert.equal(device.attributes.mig?.bool, false);
    assert.equal(device.attributes.productName?.string, "Example GPU 24G");
    assert.equal(device.attributes.driverVersion?.version, "550.54.15");
    assert.equal(device.capacity.cores?.requestPolicy?.validRange?.max?.string, "128");
  });
});

describe("proto2 presence", () => {
  it("encodes an explicitly set empty string and false and reads them back as set", () => {
    const spec = create(NodeSpecSchema, { providerID: "", unschedulable: false });
    const bytes = toBinary(NodeSpecSchema, spec);
    // providerID = 3 (tag 0x1a, length 0), unschedulable = 4 (tag 0x20, value 0).
    assert.equal(hex(bytes), "1a002000");
    const decoded = fromBinary(NodeSpecSchema, bytes);
    assert.ok(isFieldSet(decoded, NodeSpecSchema.field.providerID));
    assert.ok(isFieldSet(decoded, NodeSpecSchema.field.unschedulable));
    assert.ok(!isFieldSet(decoded, NodeSpecSchema.field.podCIDR));
  });

  it("omits fields that were never set", () => {
    assert.equal(toBinary(NodeSpecSchema, create(NodeSpecSchema)).length, 0);
  });

  it("tells an explicit false attribute from an absent one", () => {
    const decoded = fromBinary(DeviceAttributeSchema, toBinary(DeviceAttributeSchema, create(DeviceAttributeSchema, { bool: false })));
    assert.ok(isFieldSet(decoded, DeviceAttributeSchema.field.bool));
    assert.ok(!isFieldSet(decoded, DeviceAttributeSchema.field.int));
  });
});

describe("wire bytes worked out by hand", () => {
  it("writes each repeated string as its own field, unpacked", () => {
    const requirement = { key: "zone", operator: "In", values: ["a", "b"] };
    // key = 1: 0a 04 "zone"; operator = 2: 12 02 "In"; values = 3, one tag each: 1a 01 "a", 1a 01 "b".
    const expected = "0a047a6f6e65" + "1202496e" + "1a0161" + "1a0162";
    assert.equal(hex(toBinary(NodeSelectorRequirementSchema, create(NodeSelectorRequirementSchema, requirement))), expected);
    assert.deepEqual(fromBinary(NodeSelectorRequirementSchema, Buffer.from(expected, "hex")).values, ["a", "b"]);
  });

  it("writes each repeated int64 as its own varint field, unpacked", () => {
    // ints = 6 (tag 0x30): 1 -> 01, 300 -> ac 02. Packed would be 32 03 01 ac 02.
    assert.equal(hex(toBinary(DeviceAttributeSchema, create(DeviceAttributeSchema, { ints: [1n, 300n] }))), "300130ac02");
  });

  it("writes a string map entry under the map field's tag", () => {
    // labels = 11, length-delimited: tag (11 << 3) | 2 = 0x5a; entry: key 0a 01 "k", value 12 01 "v".
    const meta = create(ObjectMetaSchema, { labels: { k: "v" } });
    assert.equal(hex(toBinary(ObjectMetaSchema, meta)), "5a06" + "0a016b" + "120176");
  });

  it("writes a ResourceList entry as key plus embedded Quantity", () => {
    // capacity = 1 (tag 0a), entry of 13 bytes: key 0a 04 "pods", value 12 05 { string = 1: 0a 03 "110" }.
    const status = create(NodeStatusSchema, { capacity: { pods: { string: "110" } } });
    assert.equal(hex(toBinary(NodeStatusSchema, status)), "0a0d" + "0a04706f6473" + "1205" + "0a03313130");
  });
});
