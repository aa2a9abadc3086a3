// The generated descriptors against the wire contract, table by table as in cluster-autoscaler's
// https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/cloudprovider/externalgrpc/protos/externalgrpc.proto
// (plus plugpool's proposed resourceSliceBytes). A wrong
// field number, name or type in proto/ fails here; CA would otherwise misread it silently.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  CloudProvider,
  NodeGroupAutoscalingOptionsSchema,
  PricingPodPriceRequestSchema,
  file_clusterautoscaler_cloudprovider_v1_externalgrpc_externalgrpc as externalgrpcFile,
} from "../../../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import { fieldRows, isProto2 } from "./field-shape.ts";
import type { FieldRow } from "./field-shape.ts";

const TS = "google.protobuf.Timestamp";
const DURATION = "google.protobuf.Duration";

const messages: Record<string, readonly FieldRow[]> = {
  NodeGroup: [[1, "id", "string"], [2, "minSize", "int32"], [3, "maxSize", "int32"], [4, "debug", "string"]],
  ExternalGrpcNode: [
    [1, "providerID", "string"],
    [2, "name", "string"],
    [3, "labels", "map<string, string>"],
    [4, "annotations", "map<string, string>"],
  ],
  NodeGroupsRequest: [],
  NodeGroupsResponse: [[1, "nodeGroups", "repeated NodeGroup"]],
  NodeGroupForNodeRequest: [[1, "node", "ExternalGrpcNode"]],
  NodeGroupForNodeResponse: [[1, "nodeGroup", "NodeGroup"]],
  PricingNodePriceRequest: [[1, "node", "ExternalGrpcNode"], [4, "startTimestamp", TS], [5, "endTimestamp", TS]],
  PricingNodePriceResponse: [[1, "price", "double"]],
  PricingPodPriceRequest: [[4, "pod_bytes", "bytes"], [5, "startTimestamp", TS], [6, "endTimestamp", TS]],
  PricingPodPriceResponse: [[1, "price", "double"]],
  GPULabelRequest: [],
  GPULabelResponse: [[1, "label", "string"]],
  GetAvailableGPUTypesRequest: [],
  GetAvailableGPUTypesResponse: [[1, "gpuTypes", "map<string, google.protobuf.Any>"]],
  CleanupRequest: [],
  CleanupResponse: [],
  RefreshRequest: [],
  RefreshResponse: [],
  NodeGroupTargetSizeRequest: [[1, "id", "string"]],
  NodeGroupTargetSizeResponse: [[1, "targetSize", "int32"]],
  NodeGroupIncreaseSizeRequest: [[1, "delta", "int32"], [2, "id", "string"]],
  NodeGroupIncreaseSizeResponse: [],
  NodeGroupDeleteNodesRequest: [[1, "nodes", "repeated ExternalGrpcNode"], [2, "id", "string"]],
  NodeGroupDeleteNodesResponse: [],
  NodeGroupDecreaseTargetSizeRequest: [[1, "delta", "int32"], [2, "id", "string"]],
  NodeGroupDecreaseTargetSizeResponse: [],
  NodeGroupNodesRequest: [[1, "id", "string"]],
  NodeGroupNodesResponse: [[1, "instances", "repeated Instance"]],
  Instance: [[1, "id", "string"], [2, "status", "InstanceStatus"]],
  InstanceStatus: [[1, "instanceState", "InstanceStatus.InstanceState"], [2, "errorInfo", "InstanceErrorInfo"]],
  InstanceErrorInfo: [[1, "errorCode", "string"], [2, "errorMessage", "string"], [3, "instanceErrorClass", "int32"]],
  NodeGroupTemplateNodeInfoRequest: [[1, "id", "string"]],
  NodeGroupTemplateNodeInfoResponse: [[2, "nodeBytes", "bytes"], [3, "resourceSliceBytes", "repeated bytes"]],
  NodeGroupAutoscalingOptions: [
    [1, "scaleDownUtilizationThreshold", "double"],
    [2, "scaleDownGpuUtilizationThreshold", "double"],
    [6, "zeroOrMaxNodeScaling", "bool"],
    [7, "ignoreDaemonSetsUtilization", "bool"],
    [8, "scaleDownUnneededDuration", DURATION],
    [9, "scaleDownUnreadyDuration", DURATION],
    [10, "MaxNodeProvisionDuration", DURATION],
  ],
  NodeGroupAutoscalingOptionsRequest: [[1, "id", "string"], [2, "defaults", "NodeGroupAutoscalingOptions"]],
  NodeGroupAutoscalingOptionsResponse: [[1, "nodeGroupAutoscalingOptions", "NodeGroupAutoscalingOptions"]],
};

// [rpc, request, response], in the order of the reference table.
const rpcs: readonly (readonly [string, string, string])[] = [
  ["NodeGroups", "NodeGroupsRequest", "NodeGroupsResponse"],
  ["NodeGroupForNode", "NodeGroupForNodeRequest", "NodeGroupForNodeResponse"],
  ["PricingNodePrice", "PricingNodePriceRequest", "PricingNodePriceResponse"],
  ["PricingPodPrice", "PricingPodPriceRequest", "PricingPodPriceResponse"],
  ["GPULabel", "GPULabelRequest", "GPULabelResponse"],
  ["GetAvailableGPUTypes", "GetAvailableGPUTypesRequest", "GetAvailableGPUTypesResponse"],
  ["Cleanup", "CleanupRequest", "CleanupResponse"],
  ["Refresh", "RefreshRequest", "RefreshResponse"],
  ["NodeGroupTargetSize", "NodeGroupTargetSizeRequest", "NodeGroupTargetSizeResponse"],
  ["NodeGroupIncreaseSize", "NodeGroupIncreaseSizeRequest", "NodeGroupIncreaseSizeResponse"],
  ["NodeGroupDeleteNodes", "NodeGroupDeleteNodesRequest", "NodeGroupDeleteNodesResponse"],
  ["NodeGroupDecreaseTargetSize", "NodeGroupDecreaseTargetSizeRequest", "NodeGroupDecreaseTargetSizeResponse"],
  ["NodeGroupNodes", "NodeGroupNodesRequest", "NodeGroupNodesResponse"],
  ["NodeGroupTemplateNodeInfo", "NodeGroupTemplateNodeInfoRequest", "NodeGroupTemplateNodeInfoResponse"],
  ["NodeGroupGetOptions", "NodeGroupAutoscalingOptionsRequest", "NodeGroupAutoscalingOptionsResponse"],
];

const PKG = "clusterautoscaler.cloudprovider.v1.externalgrpc";

describe("externalgrpc descriptors", () => {
  it("are proto3 in package clusterautoscaler.cloudprovider.v1.externalgrpc with only WKT imports", () => {
    assert.equal(isProto2(externalgrpcFile), false);
    assert.equal(externalgrpcFile.proto.syntax, "proto3");
    assert.equal(externalgrpcFile.proto.package, PKG);
    assert.deepEqual(externalgrpcFile.dependencies.map((f) => f.name).sort(), [
      "google/protobuf/any",
      "google/protobuf/duration",
      "google/protobuf/timestamp",
    ]);
  });

  it("declare exactly the messages of the reference", () => {
    assert.deepEqual(externalgrpcFile.messages.map((m) => m.name).sort(), Object.keys(messages).sort());
  });

  for (const [name, rows] of Object.entries(messages)) {
    it(`give ${name} the field numbers, names and types of the reference`, () => {
      const message = externalgrpcFile.messages.find((m) => m.name === name);
      assert.ok(message, `message ${name} is missing`);
      assert.deepEqual(fieldRows(message), rows);
    });
  }

  it("nest InstanceState in InstanceStatus with the upstream value names and numbers", () => {
    const status = externalgrpcFile.messages.find((m) => m.name === "InstanceStatus");
    assert.deepEqual(status?.nestedEnums.map((e) => e.typeName), [`${PKG}.InstanceStatus.InstanceState`]);
    assert.deepEqual(
      status.nestedEnums[0]?.values.map((v) => [v.number, v.name]),
      [[0, "unspecified"], [1, "instanceRunning"], [2, "instanceCreating"], [3, "instanceDeleting"]],
    );
  });

  it("leave the retired field numbers unreserved, as upstream does", () => {
    for (const message of externalgrpcFile.messages) {
      assert.deepEqual(message.proto.reservedRange, [], message.name);
    }
  });

  it("keep the upstream spelling of pod_bytes and MaxNodeProvisionDuration in the TS property names", () => {
    assert.equal(PricingPodPriceRequestSchema.field.podBytes.name, "pod_bytes");
    assert.equal(NodeGroupAutoscalingOptionsSchema.field.MaxNodeProvisionDuration.name, "MaxNodeProvisionDuration");
  });
});

describe("CloudProvider service descriptor", () => {
  it("is clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider", () => {
    assert.equal(CloudProvider.typeName, `${PKG}.CloudProvider`);
    assert.deepEqual(externalgrpcFile.services, [CloudProvider]);
  });

  it("has exactly the 15 unary RPCs of the reference with their request and response types", () => {
    assert.deepEqual(
      CloudProvider.methods.map((m) => [m.name, m.input.typeName, m.output.typeName, m.methodKind]),
      rpcs.map(([rpc, input, output]) => [rpc, `${PKG}.${input}`, `${PKG}.${output}`, "unary"]),
    );
  });
});
