// Kubernetes protobuf encodings of the domain's template data: raw message bytes, as gogo's Marshal()
// writes them (no "k8s\0" envelope), which is what CA's externalgrpc client unmarshals.
import { create, toBinary } from "@bufbuild/protobuf";
import type { DeviceSlice, TemplateNode } from "../../domain/index.ts";
import { NodeSchema, NodeConditionSchema, TaintSchema } from "../../../gen/k8s.io/api/core/v1/generated_pb.ts";
import type { Quantity } from "../../../gen/k8s.io/apimachinery/pkg/api/resource/generated_pb.ts";
import { QuantitySchema } from "../../../gen/k8s.io/apimachinery/pkg/api/resource/generated_pb.ts";
import { TimeSchema } from "../../../gen/k8s.io/apimachinery/pkg/apis/meta/v1/generated_pb.ts";
import type { DeviceAttribute } from "../../../gen/k8s.io/api/resource/v1/generated_pb.ts";
import {
  DeviceAttributeSchema,
  DeviceCapacitySchema,
  ResourceSliceSchema,
} from "../../../gen/k8s.io/api/resource/v1/generated_pb.ts";

function quantities(list: Readonly<Record<string, string>>): Record<string, Quantity> {
  return Object.fromEntries(Object.entries(list).map(([k, v]) => [k, create(QuantitySchema, { string: v })]));
}

/** `v1.Node` bytes for a template. `nowMs` dates the conditions a minute back, as CA's own templates do. */
export function encodeTemplateNode(node: TemplateNode, nowMs: number): Uint8Array {
  const transition = create(TimeSchema, { seconds: BigInt(Math.floor(nowMs / 1000) - 60), nanos: 0 });
  const message = create(NodeSchema, {
    metadata: { name: node.name, labels: { ...node.labels } },
    spec: {
      taints: node.taints.map((t) => create(TaintSchema, { key: t.key, value: t.value, effect: t.effect })),
    },
    status: {
      capacity: quantities(node.capacity),
      allocatable: quantities(node.allocatable),
      phase: "Running",
      conditions: node.conditions.map((c) =>
        create(NodeConditionSchema, {
          type: c.type,
          status: c.status,
          reason: c.reason,
          lastHeartbeatTime: transition,
          lastTransitionTime: transition,
        }),
      ),
    },
  });
  return toBinary(NodeSchema, message);
}

function attribute(value: DeviceSlice["devices"][number]["attributes"][string]): DeviceAttribute {
  if ("int" in value) return create(DeviceAttributeSchema, { int: BigInt(value.int) });
  if ("bool" in value) return create(DeviceAttributeSchema, { bool: value.bool });
  if ("string" in value) return create(DeviceAttributeSchema, { string: value.string });
  return create(DeviceAttributeSchema, { version: value.version });
}

/** `resource.k8s.io/v1` ResourceSlice bytes for one node-local template slice. */
export function encodeResourceSlice(slice: DeviceSlice, name: string): Uint8Array {
  const message = create(ResourceSliceSchema, {
    metadata: { name },
    spec: {
      driver: slice.driver,
      nodeName: slice.nodeName,
      pool: {
        name: slice.pool.name,
        generation: BigInt(slice.pool.generation),
        resourceSliceCount: BigInt(slice.pool.resourceSliceCount),
      },
      devices: slice.devices.map((d) => ({
        name: d.name,
        attributes: Object.fromEntries(Object.entries(d.attributes).map(([k, v]) => [k, attribute(v)])),
        capacity: Object.fromEntries(
          Object.entries(d.capacity).map(([k, v]) => [k, create(DeviceCapacitySchema, { value: { string: v } })]),
        ),
      })),
    },
  });
  return toBinary(ResourceSliceSchema, message);
}
