// Conversion between the wire messages and the domain's plain data; nothing else.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Instance, NodeGroupInfo, NodeRef } from "../../domain/index.ts";
import type { ExternalGrpcNode } from "../../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import {
  InstanceSchema,
  InstanceStatus_InstanceState,
  NodeGroupSchema,
} from "../../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";

/** CA's error class "Other" (cloudprovider.OtherErrorClass); 1 would mean out of resources. */
const OTHER_ERROR_CLASS = 99;

const states = {
  creating: InstanceStatus_InstanceState.instanceCreating,
  running: InstanceStatus_InstanceState.instanceRunning,
  deleting: InstanceStatus_InstanceState.instanceDeleting,
} as const;

export function fromExternalGrpcNode(node: ExternalGrpcNode): NodeRef {
  return { name: node.name, providerID: node.providerID };
}

export function toNodeGroup(group: NodeGroupInfo): MessageInitShape<typeof NodeGroupSchema> {
  return { id: group.id, minSize: group.minSize, maxSize: group.maxSize, debug: group.debug };
}

export function toInstance(instance: Instance): MessageInitShape<typeof InstanceSchema> {
  return {
    id: instance.id,
    status: {
      instanceState: states[instance.state],
      ...(instance.error && {
        errorInfo: {
          errorCode: instance.error.code,
          errorMessage: instance.error.message,
          instanceErrorClass: OTHER_ERROR_CLASS,
        },
      }),
    },
  };
}
