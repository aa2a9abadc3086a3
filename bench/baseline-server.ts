// Child process of bench/baseline.ts: the CloudProvider service answering with the recorded constants, over
// h2c gRPC as plugpool's server is set up (connect-node adapter on node:http2, gRPC protocol only).
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { fromBinary } from "@bufbuild/protobuf";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { CloudProvider } from "../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import type { RecordedAnswers } from "./baseline.ts";

let server: http2.Http2Server | undefined;

async function listen(answers: RecordedAnswers): Promise<number> {
  const m = CloudProvider.method;
  const decode = (base64: string) => Buffer.from(base64, "base64");
  const nodes = fromBinary(m.nodeGroupNodes.output, decode(answers.nodeGroupNodes));
  const forNode = fromBinary(m.nodeGroupForNode.output, decode(answers.nodeGroupForNode));
  const size = fromBinary(m.nodeGroupTargetSize.output, decode(answers.nodeGroupTargetSize));
  const template = fromBinary(m.nodeGroupTemplateNodeInfo.output, decode(answers.nodeGroupTemplateNodeInfo));
  const handler = connectNodeAdapter({
    routes: (router) => {
      router.service(CloudProvider, {
        nodeGroupNodes: () => nodes,
        nodeGroupForNode: () => forNode,
        nodeGroupTargetSize: () => size,
        nodeGroupTemplateNodeInfo: () => template,
      });
    },
    grpc: true,
    grpcWeb: false,
    connect: false,
  });
  const h2 = http2.createServer(handler);
  server = h2;
  await new Promise<void>((resolve) => h2.listen(0, "127.0.0.1", resolve));
  return (h2.address() as AddressInfo).port;
}

process.once("message", (message) => {
  void listen(message as RecordedAnswers).then((port) => process.send?.({ port }));
});

process.once("disconnect", () => {
  server?.close();
  process.exit(0);
});
