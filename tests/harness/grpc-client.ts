// An independent gRPC client for tests and benchmarks: @grpc/grpc-js (its own HTTP/2 and gRPC framing, as
// cluster-autoscaler's grpc-go is) with messages (de)serialised by the generated schemas.
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { CloudProvider } from "../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";

type Methods = typeof CloudProvider.method;
type MethodName = keyof Methods;
type Input<M extends MethodName> = MessageInitShape<Methods[M]["input"]>;
type Output<M extends MethodName> = MessageShape<Methods[M]["output"]>;

type Unary = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: unknown) => void,
) => void;

export interface CallResult<M extends MethodName> {
  readonly response?: Output<M>;
  readonly error?: grpc.ServiceError;
}

export interface CloudProviderClient {
  /** Calls a method; resolves with the response or the gRPC error (never rejects). */
  call<M extends MethodName>(method: M, request: Input<M>, options?: { deadlineMs?: number }): Promise<CallResult<M>>;
  close(): void;
}

function definition(): grpc.ServiceDefinition {
  const def: Record<string, grpc.MethodDefinition<MessageShape<DescMessage>, MessageShape<DescMessage>>> = {};
  for (const method of CloudProvider.methods) {
    const input: DescMessage = method.input;
    const output: DescMessage = method.output;
    def[method.localName] = {
      path: `/${CloudProvider.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (m: MessageShape<DescMessage>) => Buffer.from(toBinary(input, m)),
      requestDeserialize: (b: Buffer) => fromBinary(input, b),
      responseSerialize: (m: MessageShape<DescMessage>) => Buffer.from(toBinary(output, m)),
      responseDeserialize: (b: Buffer) => fromBinary(output, b),
    };
  }
  return def;
}

/** A plaintext (h2c) client, as CA uses when its cloud-config has no `cert`; or mTLS with `credentials`. */
export function createCloudProviderClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
): CloudProviderClient {
  const Client = grpc.makeGenericClientConstructor(definition(), "CloudProvider");
  const client = new Client(address, credentials);
  return {
    call(method, request, options = {}) {
      const desc = CloudProvider.method[method] as unknown as { input: DescMessage };
      const message = create(desc.input, request as MessageInitShape<DescMessage>);
      const deadline = new Date(Date.now() + (options.deadlineMs ?? 5000));
      return new Promise((resolve) => {
        const fn = (client as unknown as Record<string, Unary | undefined>)[method];
        fn?.call(client, message, new grpc.Metadata(), { deadline }, (error, response) => {
          resolve(error ? { error } : { response: response as Output<typeof method> });
        });
      });
    },
    close: () => {
      client.close();
    },
  };
}
