// Every RPC over real h2c with an independent client (@grpc/grpc-js), through the real domain over fakes.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { status } from "@grpc/grpc-js";
import { fromBinary } from "@bufbuild/protobuf";
import type { Pool } from "../../../src/domain/index.ts";
import { cloudProviderRoutes, errorMapping } from "../../../src/adapters/grpc/routes.ts";
import { startGrpcServer, type GrpcServer } from "../../../src/adapters/grpc/server.ts";
import { InstanceStatus_InstanceState } from "../../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import { NodeSchema } from "../../../gen/k8s.io/api/core/v1/generated_pb.ts";
import { createCloudProviderClient, type CloudProviderClient } from "../../harness/grpc-client.ts";
import { World, PREFIX } from "../../harness/fakes/world.ts";

interface Served {
  world: World;
  server: GrpcServer;
  client: CloudProviderClient;
  cleanups: number;
}

/** A server over `world.pool` (or over a pool derived from it), and a grpc-js client to it. */
async function serveWorld(world: World, pool: (p: Pool) => Pool = (p) => p): Promise<Served> {
  const served = { world, cleanups: 0 } as Served;
  served.server = await startGrpcServer({
    host: "127.0.0.1",
    port: 0,
    routes: cloudProviderRoutes({
      pool: pool(world.pool),
      clock: world.clock,
      cleanup: () => {
        served.cleanups++;
        return Promise.resolve();
      },
    }),
    interceptors: [errorMapping],
  });
  served.client = createCloudProviderClient(`127.0.0.1:${served.server.port}`);
  return served;
}

async function stop(s: Served): Promise<void> {
  s.client.close();
  await s.server.close(100);
}

describe("the CloudProvider service over h2c (grpc-js client)", () => {
  let s: Served;
  before(async () => {
    s = await serveWorld(new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"], maxSize: 2 }] }));
    const refreshed = await s.client.call("refresh", {});
    assert.equal(refreshed.error, undefined);
  });
  after(() => stop(s));

  it("lists the configured node groups", async () => {
    const { response } = await s.client.call("nodeGroups", {});
    assert.deepEqual(
      response?.nodeGroups.map((g) => [g.id, g.minSize, g.maxSize]),
      [["workers", 0, 2]],
    );
    assert.match(response.nodeGroups[0]?.debug ?? "", /worker-1/);
  });

  it("maps a machine's node to its group and an unknown node to an empty id", async () => {
    const mine = await s.client.call("nodeGroupForNode", { node: { name: "worker-1", providerID: `${PREFIX}worker-1` } });
    assert.equal(mine.response?.nodeGroup?.id, "workers");
    const fake = await s.client.call("nodeGroupForNode", {
      node: { name: `${PREFIX}worker-2`, providerID: `${PREFIX}worker-2` },
    });
    assert.equal(fake.response?.nodeGroup?.id, "workers");
    const other = await s.client.call("nodeGroupForNode", { node: { name: "control-plane", providerID: "k3s://control-plane" } });
    assert.equal(other.error, undefined);
    assert.equal(other.response?.nodeGroup?.id ?? "", "");
  });

  it("answers Unimplemented only for pricing and GetOptions", async () => {
    for (const method of ["pricingNodePrice", "pricingPodPrice", "nodeGroupGetOptions"] as const) {
      const { error } = await s.client.call(method, {});
      assert.equal(error?.code, status.UNIMPLEMENTED, method);
    }
  });

  it("answers GPULabel and GetAvailableGPUTypes", async () => {
    assert.equal((await s.client.call("gPULabel", {})).response?.label, "example.com/gpu");
    const types = await s.client.call("getAvailableGPUTypes", {});
    assert.equal(types.error, undefined);
    assert.deepEqual(Object.keys(types.response?.gpuTypes ?? {}), []);
  });

  it("acknowledges Cleanup", async () => {
    const { error } = await s.client.call("cleanup", {});
    assert.equal(error, undefined);
    assert.equal(s.cleanups, 1);
  });

  it("returns a template whose nodeBytes decode to a Kubernetes Node", async () => {
    const { response } = await s.client.call("nodeGroupTemplateNodeInfo", { id: "workers" });
    const node = fromBinary(NodeSchema, response?.nodeBytes ?? new Uint8Array());
    assert.equal(node.metadata?.labels["example.com/pool"], "workers");
    assert.equal(node.status?.allocatable.pods?.string, "110");
    assert.equal(node.status.capacity.cpu?.string, "24");
    assert.equal(node.status.conditions.find((c) => c.type === "Ready")?.status, "True");
    assert.deepEqual(response?.resourceSliceBytes, []);
  });

  it("re-encodes a template as soon as it changes, and dates its conditions by the minute", async (t) => {
    const world = new World({ groups: [{ id: "workers", machines: ["worker-1"], maxSize: 1 }] });
    const served = await serveWorld(world);
    t.after(() => stop(served));
    const ask = async () => {
      const { response } = await served.client.call("nodeGroupTemplateNodeInfo", { id: "workers" });
      return { node: fromBinary(NodeSchema, response?.nodeBytes ?? new Uint8Array()), slices: response?.resourceSliceBytes.length };
    };
    const since = (n: Awaited<ReturnType<typeof ask>>["node"]) => n.status?.conditions[0]?.lastTransitionTime?.seconds ?? 0n;
    const first = await ask();
    assert.equal(first.slices, 0);
    world.cluster.setSlices("worker-1", [{
      driver: "gpu.example.com",
      pool: { name: "worker-1-gpus", generation: 1, resourceSliceCount: 1 },
      nodeName: "worker-1",
      devices: [{ name: "gpu-0", attributes: {}, capacity: {} }],
    }]);
    assert.equal((await ask()).slices, 1);
    world.clock.advance(59_000);
    assert.equal(since((await ask()).node), since(first.node), "the same minute, the same date");
    world.clock.advance(60_000);
    assert.equal(since((await ask()).node) - since(first.node), 60n);
  });

  it("answers NotFound for an unknown group", async () => {
    for (const method of ["nodeGroupTargetSize", "nodeGroupNodes", "nodeGroupTemplateNodeInfo"] as const) {
      const { error } = await s.client.call(method, { id: "nope" });
      assert.equal(error?.code, status.NOT_FOUND, method);
    }
  });

  it("scales up: IncreaseSize switches a plug on and the instance is creating, then running", async () => {
    const { world, client } = s;
    assert.equal((await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 })).error, undefined);
    assert.equal(world.power.isOn(world.machine("worker-1").power), true);
    assert.equal((await client.call("nodeGroupTargetSize", { id: "workers" })).response?.targetSize, 1);
    let nodes = await client.call("nodeGroupNodes", { id: "workers" });
    assert.deepEqual(
      nodes.response?.instances.map((i) => [i.id, i.status?.instanceState]),
      [[`${PREFIX}worker-1`, InstanceStatus_InstanceState.instanceCreating]],
    );
    world.register("worker-1");
    nodes = await client.call("nodeGroupNodes", { id: "workers" });
    assert.equal(nodes.response?.instances[0]?.status?.instanceState, InstanceStatus_InstanceState.instanceRunning);
  });

  it("rejects invalid deltas with InvalidArgument", async () => {
    const { client } = s;
    assert.equal((await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 0 })).error?.code, status.INVALID_ARGUMENT);
    assert.equal((await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 5 })).error?.code, status.INVALID_ARGUMENT);
    assert.equal(
      (await client.call("nodeGroupDecreaseTargetSize", { id: "workers", delta: 1 })).error?.code,
      status.INVALID_ARGUMENT,
    );
    // worker-1 is registered: there is no unregistered instance to drop.
    assert.equal(
      (await client.call("nodeGroupDecreaseTargetSize", { id: "workers", delta: -1 })).error?.code,
      status.INVALID_ARGUMENT,
    );
  });

  it("refuses DeleteNodes for a registered node without the taint (FailedPrecondition) and keeps its power", async () => {
    const { world, client } = s;
    const { error } = await client.call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: "worker-1", providerID: `${PREFIX}worker-1` }],
    });
    assert.equal(error?.code, status.FAILED_PRECONDITION);
    assert.equal(world.power.isOn(world.machine("worker-1").power), true);
    assert.equal(world.power.callsOf("turnOff").length, 0);
  });

  it("answers NotFound for DeleteNodes of a node that is not in the group", async () => {
    const { error } = await s.client.call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: "elsewhere", providerID: "k3s://elsewhere" }],
    });
    assert.equal(error?.code, status.NOT_FOUND);
  });

  it("starts a power-off for a tainted node and reports it deleting at once", async () => {
    const { world, client } = s;
    world.cluster.taint("worker-1");
    const { error } = await client.call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: "worker-1", providerID: `${PREFIX}worker-1` }],
    });
    assert.equal(error, undefined);
    const nodes = await client.call("nodeGroupNodes", { id: "workers" });
    assert.equal(nodes.response?.instances[0]?.status?.instanceState, InstanceStatus_InstanceState.instanceDeleting);
    assert.equal((await client.call("nodeGroupTargetSize", { id: "workers" })).response?.targetSize, 0);
  });
});

describe("error reporting over the wire", () => {
  it("reports a failed boot as creating with errorInfo of class Other", async () => {
    const s = await serveWorld(new World());
    try {
      await s.client.call("refresh", {});
      await s.client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 });
      s.world.power.set(s.world.machine("worker-1").power, false);
      await s.client.call("refresh", {});
      const { response } = await s.client.call("nodeGroupNodes", { id: "workers" });
      const status0 = response?.instances[0]?.status;
      assert.equal(status0?.instanceState, InstanceStatus_InstanceState.instanceCreating);
      assert.notEqual(status0.errorInfo?.errorCode ?? "", "");
      assert.equal(status0.errorInfo?.instanceErrorClass, 99);
    } finally {
      await stop(s);
    }
  });

  it("answers Unavailable naming the plug when no plug could be switched on", async () => {
    const s = await serveWorld(new World({ groups: [{ id: "workers", machines: ["worker-1"] }] }));
    try {
      await s.client.call("refresh", {});
      s.world.power.failNext("turnOn");
      const { error } = await s.client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 });
      assert.equal(error?.code, status.UNAVAILABLE);
      assert.match(error.details, /worker-1/);
    } finally {
      await stop(s);
    }
  });

  it("keeps Refresh OK when a plug cannot be read", async () => {
    const s = await serveWorld(new World());
    try {
      s.world.power.setFault(s.world.machine("worker-2").power, "unreachable");
      assert.equal((await s.client.call("refresh", {})).error, undefined);
    } finally {
      await stop(s);
    }
  });

  it("hides unexpected failures behind Internal without leaking their text", async () => {
    const s = await serveWorld(new World(), (pool) => ({
      ...pool,
      targetSize: () => {
        throw new Error("connection string postgres://admin:hunter2@db");
      },
    }));
    try {
      const { error } = await s.client.call("nodeGroupTargetSize", { id: "workers" });
      assert.equal(error?.code, status.INTERNAL);
      assert.doesNotMatch(error.details, /hunter2/);
    } finally {
      await stop(s);
    }
  });

  it("answers IncreaseSize before the client's deadline while a plug hangs, with the switch-on counted as underway", async () => {
    const s = await serveWorld(new World());
    try {
      await s.client.call("refresh", {});
      for (const m of s.world.machines()) s.world.power.setFault(m.power, "hang");
      const started = performance.now();
      const { error } = await s.client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 }, { deadlineMs: 1000 });
      assert.equal(error, undefined, "answered before the deadline");
      assert.ok(performance.now() - started < 3000);
      assert.equal((await s.client.call("nodeGroupTargetSize", { id: "workers" })).response?.targetSize, 1);
      // A Refresh while every plug hangs answers too, before its deadline.
      assert.equal((await s.client.call("refresh", {}, { deadlineMs: 1000 })).error, undefined);
    } finally {
      await stop(s);
    }
  });
});
