// The Kubernetes subset against the upstream field tables (k8s.io/api and apimachinery v0.36.2:
// https://github.com/kubernetes/api/blob/v0.36.2/core/v1/generated.proto). The Go reader decodes nodeBytes and resourceSliceBytes by number and
// wire type only, so every number and type here is load-bearing.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { DescFile } from "@bufbuild/protobuf";
import { file_k8s_io_api_core_v1_generated as coreFile } from "../../../../gen/k8s.io/api/core/v1/generated_pb.ts";
import { file_k8s_io_api_resource_v1_generated as draFile } from "../../../../gen/k8s.io/api/resource/v1/generated_pb.ts";
import { file_k8s_io_apimachinery_pkg_api_resource_generated as quantityFile } from "../../../../gen/k8s.io/apimachinery/pkg/api/resource/generated_pb.ts";
import { file_k8s_io_apimachinery_pkg_apis_meta_v1_generated as metaFile } from "../../../../gen/k8s.io/apimachinery/pkg/apis/meta/v1/generated_pb.ts";
import { fieldRows, isProto2 } from "./field-shape.ts";
import type { FieldRow } from "./field-shape.ts";

const S = "optional string";
const B = "optional bool";
const TIME = "optional k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const META = "optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const Q = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const SELECTOR = "optional k8s.io.api.core.v1.NodeSelector";

const meta: Record<string, readonly FieldRow[]> = {
  ObjectMeta: [
    [1, "name", S], [2, "generateName", S], [3, "namespace", S], [4, "selfLink", S], [5, "uid", S],
    [6, "resourceVersion", S], [7, "generation", "optional int64"],
    [8, "creationTimestamp", "optional Time"], [9, "deletionTimestamp", "optional Time"],
    [10, "deletionGracePeriodSeconds", "optional int64"],
    [11, "labels", "map<string, string>"], [12, "annotations", "map<string, string>"],
    [13, "ownerReferences", "repeated OwnerReference"], [14, "finalizers", "repeated string"],
  ],
  OwnerReference: [[1, "kind", S], [3, "name", S], [4, "uid", S], [5, "apiVersion", S], [6, "controller", B], [7, "blockOwnerDeletion", B]],
  Time: [[1, "seconds", "optional int64"], [2, "nanos", "optional int32"]],
  Duration: [[1, "duration", "optional int64"]],
};

const quantity: Record<string, readonly FieldRow[]> = {
  Quantity: [[1, "string", S]],
};

const core: Record<string, readonly FieldRow[]> = {
  Node: [[1, "metadata", META], [2, "spec", "optional NodeSpec"], [3, "status", "optional NodeStatus"]],
  NodeSpec: [
    [1, "podCIDR", S], [2, "externalID", S], [3, "providerID", S], [4, "unschedulable", B],
    [5, "taints", "repeated Taint"], [7, "podCIDRs", "repeated string"],
  ],
  Taint: [[1, "key", S], [2, "value", S], [3, "effect", S], [4, "timeAdded", TIME]],
  NodeStatus: [
    [1, "capacity", `map<string, ${Q}>`], [2, "allocatable", `map<string, ${Q}>`], [3, "phase", S],
    [4, "conditions", "repeated NodeCondition"], [5, "addresses", "repeated NodeAddress"],
    [7, "nodeInfo", "optional NodeSystemInfo"],
  ],
  NodeCondition: [
    [1, "type", S], [2, "status", S], [3, "lastHeartbeatTime", TIME], [4, "lastTransitionTime", TIME],
    [5, "reason", S], [6, "message", S],
  ],
  NodeAddress: [[1, "type", S], [2, "address", S]],
  NodeSystemInfo: [
    [1, "machineID", S], [2, "systemUUID", S], [3, "bootID", S], [4, "kernelVersion", S], [5, "osImage", S],
    [6, "containerRuntimeVersion", S], [7, "kubeletVersion", S], [8, "kubeProxyVersion", S],
    [9, "operatingSystem", S], [10, "architecture", S],
  ],
  NodeSelector: [[1, "nodeSelectorTerms", "repeated NodeSelectorTerm"]],
  NodeSelectorTerm: [[1, "matchExpressions", "repeated NodeSelectorRequirement"], [2, "matchFields", "repeated NodeSelectorRequirement"]],
  NodeSelectorRequirement: [[1, "key", S], [2, "operator", S], [3, "values", "repeated string"]],
};

const dra: Record<string, readonly FieldRow[]> = {
  ResourceSlice: [[1, "metadata", META], [2, "spec", "optional ResourceSliceSpec"]],
  ResourceSliceSpec: [
    [1, "driver", S], [2, "pool", "optional ResourcePool"], [3, "nodeName", S], [4, "nodeSelector", SELECTOR],
    [5, "allNodes", B], [6, "devices", "repeated Device"], [7, "perDeviceNodeSelection", B],
    [8, "sharedCounters", "repeated CounterSet"],
  ],
  ResourcePool: [[1, "name", S], [2, "generation", "optional int64"], [3, "resourceSliceCount", "optional int64"]],
  Device: [
    [1, "name", S], [2, "attributes", "map<string, DeviceAttribute>"], [3, "capacity", "map<string, DeviceCapacity>"],
    [4, "consumesCounters", "repeated DeviceCounterConsumption"], [5, "nodeName", S], [6, "nodeSelector", SELECTOR],
    [7, "allNodes", B], [8, "taints", "repeated DeviceTaint"], [9, "bindsToNode", B],
    [10, "bindingConditions", "repeated string"], [11, "bindingFailureConditions", "repeated string"],
    [12, "allowMultipleAllocations", B],
    [13, "nodeAllocatableResourceMappings", "map<string, NodeAllocatableResourceMapping>"],
  ],
  DeviceAttribute: [
    [2, "int", "optional int64"], [3, "bool", B], [4, "string", S], [5, "version", S],
    [6, "ints", "repeated int64"], [7, "bools", "repeated bool"], [8, "strings", "repeated string"],
    [9, "versions", "repeated string"],
  ],
  DeviceCapacity: [[1, "value", `optional ${Q}`], [2, "requestPolicy", "optional CapacityRequestPolicy"]],
  CapacityRequestPolicy: [
    [1, "default", `optional ${Q}`], [3, "validValues", `repeated ${Q}`],
    [4, "validRange", "optional CapacityRequestPolicyRange"],
  ],
  CapacityRequestPolicyRange: [[1, "min", `optional ${Q}`], [2, "max", `optional ${Q}`], [3, "step", `optional ${Q}`]],
  CounterSet: [[1, "name", S], [2, "counters", "map<string, Counter>"]],
  Counter: [[1, "value", `optional ${Q}`]],
  DeviceCounterConsumption: [[1, "counterSet", S], [2, "counters", "map<string, Counter>"]],
  DeviceTaint: [[1, "key", S], [2, "value", S], [3, "effect", S], [4, "timeAdded", TIME]],
  NodeAllocatableResourceMapping: [[1, "capacityKey", S], [2, "allocationMultiplier", `optional ${Q}`]],
};

const files: readonly (readonly [DescFile, string, Record<string, readonly FieldRow[]>])[] = [
  [metaFile, "k8s.io.apimachinery.pkg.apis.meta.v1", meta],
  [quantityFile, "k8s.io.apimachinery.pkg.api.resource", quantity],
  [coreFile, "k8s.io.api.core.v1", core],
  [draFile, "k8s.io.api.resource.v1", dra],
];

for (const [file, pkg, messages] of files) {
  describe(`${file.name}.proto descriptors`, () => {
    it(`are proto2 in package ${pkg}`, () => {
      assert.equal(isProto2(file), true);
      assert.equal(file.proto.package, pkg);
    });

    it("declare exactly the messages of the table", () => {
      assert.deepEqual(file.messages.map((m) => m.name).sort(), Object.keys(messages).sort());
    });

    for (const [name, rows] of Object.entries(messages)) {
      it(`give ${name} the upstream field numbers, names and types`, () => {
        const message = file.messages.find((m) => m.name === name);
        assert.ok(message, `message ${name} is missing`);
        assert.deepEqual(fieldRows(message), rows);
      });
    }

    it("encode repeated scalars unpacked, as Kubernetes does", () => {
      for (const message of file.messages) {
        for (const field of message.fields) {
          if (field.fieldKind === "list" && field.listKind === "scalar") {
            assert.equal(field.packed, false, `${message.name}.${field.name}`);
          }
        }
      }
    });
  });
}
