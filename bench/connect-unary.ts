// One gRPC unary call through Connect's router, without I/O, for bench/promotion.ts. A module of its own so that
// the bench can also load it bundled the way dist/plugpool.mjs is (scripts/bundle.ts).
import { create } from "@bufbuild/protobuf";
import { createConnectRouter } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { CloudProvider } from "../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";

/** One gRPC NodeGroupTargetSize call through Connect's router, as its Node.js adapter makes it. */
export function connectUnary(): () => Promise<number> {
  const router = createConnectRouter({ grpc: true, grpcWeb: false, connect: false });
  const targetSize = create(CloudProvider.method.nodeGroupTargetSize.output, { targetSize: 3 });
  router.service(CloudProvider, { nodeGroupTargetSize: () => targetSize });
  const path = `/${CloudProvider.typeName}/${CloudProvider.method.nodeGroupTargetSize.name}`;
  const handler = router.handlers.find((h) => h.requestPath === path);
  if (handler === undefined) throw new Error(`no handler for ${path}`);
  // A gRPC frame: no compression, 4 bytes, NodeGroupTargetSizeRequest{id: "g1"}.
  const frame = new Uint8Array([0, 0, 0, 0, 4, 0x0a, 0x02, 0x67, 0x31]);
  return async () => {
    const request: UniversalServerRequest = {
      httpVersion: "2.0",
      method: "POST",
      url: `http://127.0.0.1${path}`,
      header: new Headers({ "content-type": "application/grpc", te: "trailers" }),
      body: single(frame),
      signal: new AbortController().signal,
      contextValues: undefined,
    };
    const response = await handler(request);
    return drain(response.body);
  };
}

/** One chunk as an async iterable, made without a generator so that only the stages measured make any. */
export function single(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  let given = false;
  const next = (): Promise<IteratorResult<Uint8Array, undefined>> => {
    const result: IteratorResult<Uint8Array, undefined> = given ? { done: true, value: undefined } : { done: false, value: bytes };
    given = true;
    return Promise.resolve(result);
  };
  return { [Symbol.asyncIterator]: () => ({ next }) };
}

export async function drain(body: AsyncIterable<Uint8Array> | undefined): Promise<number> {
  let bytes = 0;
  if (body !== undefined) for await (const chunk of body) bytes += chunk.length;
  return bytes;
}
