// gRPC calls through Connect's router, without I/O, for bundled-connect.test.ts: the test bundles this module
// once as Connect is published and once as dist/plugpool.mjs is built, and compares what each call answers.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createConnectRouter, type Interceptor } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { CloudProvider } from "../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";

export interface Answer {
  readonly status: number;
  readonly header: [string, string][];
  readonly body: number[];
  readonly trailer: [string, string][];
  /** What the interceptor saw, in order. */
  readonly seen: string[];
}

export interface Call {
  /** The request body as the client sends it: gRPC frames. */
  readonly chunks: Uint8Array[];
  readonly header?: Record<string, string>;
}

/** A gRPC frame: flags, length, message. */
export function frame(message: Uint8Array, flags = 0): Uint8Array {
  const out = new Uint8Array(5 + message.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, message.length);
  out.set(message, 5);
  return out;
}

/** NodeGroupTargetSizeRequest{id}. */
export function request(id: string): Uint8Array {
  const bytes = new TextEncoder().encode(id);
  return new Uint8Array([0x0a, bytes.length, ...bytes]);
}

/** Answers NodeGroupTargetSize by the group id asked: ok, a ConnectError, a plain error, or never (until aborted). */
export async function call({ chunks, header = {} }: Call): Promise<Answer> {
  const seen: string[] = [];
  const interceptor: Interceptor = (next) => async (req) => {
    seen.push(`before ${req.method.name}`);
    try {
      const res = await next(req);
      seen.push("after");
      return res;
    } catch (e) {
      seen.push(`threw ${ConnectError.from(e).code}`);
      throw e;
    }
  };
  const router = createConnectRouter({ grpc: true, grpcWeb: false, connect: false, interceptors: [interceptor] });
  router.service(CloudProvider, {
    nodeGroupTargetSize: async (req, context) => {
      if (req.id === "missing") throw new ConnectError("no such group", Code.NotFound);
      if (req.id === "crash") throw new Error("a bug");
      if (req.id === "hang") {
        await new Promise((resolve) => {
          context.signal.addEventListener("abort", resolve, { once: true });
        });
        throw ConnectError.from(context.signal.reason);
      }
      return create(CloudProvider.method.nodeGroupTargetSize.output, { targetSize: req.id.length });
    },
  });
  const path = `/${CloudProvider.typeName}/${CloudProvider.method.nodeGroupTargetSize.name}`;
  const handler = router.handlers.find((h) => h.requestPath === path);
  if (handler === undefined) throw new Error(`no handler for ${path}`);
  const uRequest: UniversalServerRequest = {
    httpVersion: "2.0",
    method: "POST",
    url: `http://127.0.0.1${path}`,
    header: new Headers({ "content-type": "application/grpc", te: "trailers", ...header }),
    body: (async function* () {
      for (const chunk of chunks) yield await Promise.resolve(chunk);
    })(),
    signal: new AbortController().signal,
    contextValues: undefined,
  };
  const response = await handler(uRequest);
  const body: number[] = [];
  if (response.body !== undefined) for await (const chunk of response.body) body.push(...chunk);
  return {
    status: response.status,
    header: [...new Headers(response.header).entries()],
    body,
    trailer: [...new Headers(response.trailer).entries()],
    seen,
  };
}
