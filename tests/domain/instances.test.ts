import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION } from "../../src/domain/index.ts";
import { World } from "../harness/fakes/world.ts";
import { throwsWith } from "../harness/fakes/assertions.ts";

describe("Pool.instances()", () => {
  it("lists no instance for a machine that is off and unregistered", async () => {
    const w = new World();
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), []);
    assert.equal(w.pool.targetSize("workers"), 0);
  });

  it("shows registered machines running and unregistered ones plugpool switched on creating, in config order", async () => {
    const w = new World({ on: ["worker-1", "worker-3"], poweredByPlugpool: ["worker-1"] });
    w.register("worker-3");
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), [
      { id: "k3s://worker-1", state: "creating" },
      { id: "k3s://worker-3", state: "running" },
    ]);
  });

  it("shows a registered machine running even before its plug has been read", () => {
    const w = new World();
    w.register("worker-2");
    assert.deepEqual(w.pool.instances("workers"), [{ id: "k3s://worker-2", state: "running" }]);
  });

  it("shows a machine under a Node with a foreign providerID as no instance: never running, never creating", async () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    w.cluster.addNode({ name: "worker-1", providerID: "aws:///i-1" });
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), []);
  });

  it("leaves a machine powered outside plugpool out of view: no instance, reported once, never cut", async () => {
    const w = new World({ on: ["worker-2"] });
    await w.pool.refresh();
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), []);
    assert.deepEqual(w.pool.poweredOutside(), ["worker-2"]);
    assert.equal(w.reporter.of("powered-outside").length, 1);
    await w.pool.deleteNodes("workers", [w.fakeRef("worker-2")]);
    await assert.rejects(w.pool.decreaseTargetSize("workers", -1));
    assert.deepEqual(w.power.callsOf("turnOff"), []);
  });

  it("shows a power-off as deleting and leaves it out of the target size", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    w.register("worker-2");
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    assert.deepEqual(
      w.pool.instances("workers").map((i) => i.state),
      ["deleting", "running"],
    );
    assert.equal(w.pool.targetSize("workers"), 1);
  });

  it("keeps held machines out of cluster-autoscaler's view: no instance, no group, whatever their power", async () => {
    const w = new World({
      on: ["worker-1", "worker-2", "worker-3"],
      groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], hold: ["worker-1", "worker-2"] }],
    });
    w.register("worker-1");
    w.register("worker-3", { annotations: { [HOLD_ANNOTATION]: "true" } });
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), []);
    assert.equal(w.pool.targetSize("workers"), 0);
    for (const name of ["worker-1", "worker-2", "worker-3"]) assert.equal(w.pool.nodeGroupForNode(w.ref(name)), undefined, name);
    assert.match(w.reporter.of("powered-outside")[0]?.detail ?? "", /worker-2 is on .*not reported to cluster-autoscaler/);
  });

  it("brings a machine back into view when its hold annotation goes", async () => {
    const w = new World({ on: ["worker-1"] });
    w.register("worker-1", { annotations: { [HOLD_ANNOTATION]: "true" } });
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), []);
    w.cluster.annotate("worker-1", HOLD_ANNOTATION, undefined);
    assert.deepEqual(w.pool.instances("workers"), [{ id: "k3s://worker-1", state: "running" }]);
    assert.equal(w.pool.nodeGroupForNode(w.ref("worker-1"))?.id, "workers");
  });

  it("rejects an unknown group", () => {
    const w = new World();
    throwsWith(() => w.pool.instances("nope"), "node-group-not-found", /"nope"/);
  });
});

describe("Pool.nodeGroups()", () => {
  it("lists the configured groups with sizes and a short description", () => {
    const w = new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"], minSize: 1 }] });
    assert.deepEqual(w.pool.nodeGroups(), [
      { id: "workers", minSize: 1, maxSize: 2, debug: "workers: 2 machines (worker-1, worker-2)" },
    ]);
  });

  it("answers the configured GPU label and types", () => {
    const w = new World();
    assert.equal(w.pool.gpuLabel(), "example.com/gpu");
    assert.deepEqual(w.pool.gpuTypes(), []);
  });
});
