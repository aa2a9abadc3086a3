// Requests from the wire as arbitrary bytes and arbitrary field values, decoded and mapped into a pool: a request
// either fails to decode or reaches the domain as plain data, and the domain answers with a PlugpoolError or a
// result, never a crash; no request names its way to a plug it does not own.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { fromExternalGrpcNode } from "../../../../src/adapters/grpc/proto-mapping.ts";
import { isPlugpoolError } from "../../../../src/domain/index.ts";
import {
  ExternalGrpcNodeSchema,
  NodeGroupDeleteNodesRequestSchema,
  NodeGroupForNodeRequestSchema,
} from "../../../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import { PREFIX, World } from "../../../harness/fakes/world.ts";

const RUNS = 300;

async function world(): Promise<World> {
  const w = new World({ on: ["worker-1", "worker-2"] });
  w.register("worker-1");
  w.register("worker-2");
  await w.pool.refresh();
  return w;
}

/** Names close to the configured ones, and anything at all. */
const name = fc.oneof(
  fc.constantFrom("worker-1", "worker-2", "worker-3", `${PREFIX}worker-1`, `${PREFIX}worker-3`, "", "WORKER-1", "worker-1 "),
  fc.string({ maxLength: 80 }),
  fc.string({ unit: "binary", maxLength: 40 }),
);

describe("wire requests fuzzed into the domain", () => {
  it("decodes arbitrary bytes or refuses them, and maps what decodes without a crash", async () => {
    const w = await world();
    let decoded = 0;
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 300 }), async (bytes) => {
        let request;
        try {
          request = fromBinary(NodeGroupDeleteNodesRequestSchema, bytes);
        } catch {
          return;
        }
        decoded++;
        await w.pool.deleteNodes(request.id, request.nodes.map(fromExternalGrpcNode)).catch((e: unknown) => {
          assert.ok(isPlugpoolError(e), `not a PlugpoolError: ${String(e)}`);
        });
      }),
      { numRuns: RUNS },
    );
    console.log(`wire fuzz (bytes): ${RUNS} runs, ${decoded} decoded`);
  });

  it("maps any node a request names to one of its machines or to none, and never cuts a registered one", async () => {
    const w = await world();
    const node = fc.record({ name, providerID: name, labels: fc.dictionary(fc.string({ maxLength: 20 }), fc.string({ maxLength: 20 }), { maxKeys: 3 }) });
    let groups = 0;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("workers", "", "other"), fc.array(node, { maxLength: 4 }), async (id, nodes) => {
        const wire = nodes.map((n) => fromBinary(ExternalGrpcNodeSchema, toBinary(ExternalGrpcNodeSchema, create(ExternalGrpcNodeSchema, n))));
        for (const n of wire) {
          const forNode = fromBinary(NodeGroupForNodeRequestSchema, toBinary(NodeGroupForNodeRequestSchema, create(NodeGroupForNodeRequestSchema, { node: n })));
          if (forNode.node !== undefined && w.pool.nodeGroupForNode(fromExternalGrpcNode(forNode.node)) !== undefined) groups++;
        }
        await w.pool.deleteNodes(id, wire.map(fromExternalGrpcNode)).catch((e: unknown) => {
          assert.ok(isPlugpoolError(e), `not a PlugpoolError: ${String(e)}`);
        });
        await w.pool.reconcile();
        assert.deepEqual(w.power.callsOf("turnOff"), [], "no registered, untainted machine is cut");
        assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
      }),
      { numRuns: RUNS },
    );
    console.log(`wire fuzz (fields): ${RUNS} runs, ${groups} nodes resolved to a group`);
  });
});
