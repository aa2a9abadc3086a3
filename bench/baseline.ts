// The transport baseline: a minimal Connect server (connect-node on node:http2, h2c, the generated
// CloudProvider service) in its own process, answering the benchmarked RPCs with constants: the very answers
// plugpool gave, recorded once. Same process layout, client, transport and payload sizes, no plugpool work,
// so plugpool's latency over this one is its own overhead.
import { join } from "node:path";
import { toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { CloudProvider } from "../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import type { CloudProviderClient } from "../tests/harness/grpc-client.ts";
import { forkChild } from "./child.ts";
import type { ImageRuntime } from "./image-env.ts";
import { allocatedDuring, type Allocated } from "./plugpool-process.ts";

/** The benchmarked RPCs (local method names of the generated service). */
export const BENCHED = ["nodeGroupNodes", "nodeGroupForNode", "nodeGroupTargetSize", "nodeGroupTemplateNodeInfo"] as const;
export type BenchedMethod = (typeof BENCHED)[number];

/** Each benchmarked method's answer, protobuf-encoded and base64'd (it crosses the IPC channel as JSON). */
export type RecordedAnswers = Readonly<Record<BenchedMethod, string>>;

export interface BaselineServer {
  readonly address: string;
  readonly pid: number;
  /** Bytes the server allocated while `work` ran, and its GC pauses (gc-probe.ts). */
  allocatedDuring<T>(work: () => Promise<T>): Promise<Allocated<T>>;
  close(): Promise<void>;
}

function encoded<D extends DescMessage>(schema: D, message: MessageShape<D> | undefined, method: string): string {
  if (message === undefined) throw new Error(`recording ${method}: plugpool gave no answer`);
  return Buffer.from(toBinary(schema, message)).toString("base64");
}

/** Asks plugpool each benchmarked RPC once, with the requests the bench itself sends. */
export async function recordAnswers(
  client: CloudProviderClient,
  group: string,
  node: { name: string; providerID: string },
): Promise<RecordedAnswers> {
  const m = CloudProvider.method;
  const [nodes, forNode, size, template] = await Promise.all([
    client.call("nodeGroupNodes", { id: group }),
    client.call("nodeGroupForNode", { node }),
    client.call("nodeGroupTargetSize", { id: group }),
    client.call("nodeGroupTemplateNodeInfo", { id: group }),
  ]);
  return {
    nodeGroupNodes: encoded(m.nodeGroupNodes.output, nodes.response, "NodeGroupNodes"),
    nodeGroupForNode: encoded(m.nodeGroupForNode.output, forNode.response, "NodeGroupForNode"),
    nodeGroupTargetSize: encoded(m.nodeGroupTargetSize.output, size.response, "NodeGroupTargetSize"),
    nodeGroupTemplateNodeInfo: encoded(m.nodeGroupTemplateNodeInfo.output, template.response, "NodeGroupTemplateNodeInfo"),
  };
}

/**
 * Starts the baseline server process with the garbage probe (`probe`), run as the image runs node (`image`:
 * its variables and options) or with Node.js defaults; it exits when closed or when this process goes away.
 */
export async function startBaseline(answers: RecordedAnswers, probe: string, image?: ImageRuntime): Promise<BaselineServer> {
  const child = await forkChild<{ port: number }>(
    join(import.meta.dirname, "baseline-server.ts"),
    answers,
    [...(image?.nodeArgs ?? []), `--import=${probe}`],
    image?.env,
  );
  return {
    address: `127.0.0.1:${String(child.reply.port)}`,
    pid: child.pid,
    allocatedDuring: (work) => allocatedDuring(child.process, work),
    close: child.close,
  };
}
