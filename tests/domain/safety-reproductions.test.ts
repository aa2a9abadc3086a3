// Each of these is a way a running machine once lost power (or could have): the scenario, replayed on the fakes,
// now keeps the machine's power.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { POWER_OFF_ANNOTATION, TO_BE_DELETED_TAINT, isPlugpoolError } from "../../src/domain/index.ts";
import { World, deletingWorker1, plugOffAndOnAgainMidPowerOff } from "../harness/fakes/world.ts";
import { rejectsWith } from "../harness/fakes/assertions.ts";

const TAINT = { key: TO_BE_DELETED_TAINT, value: "1", effect: "NoSchedule" as const };

/** The signal of a call whose deadline passes as its first power-off record is sent. */
function deadlineAtRecord(w: World): AbortSignal {
  const controller = new AbortController();
  w.cluster.onCall = (c) => {
    if (c.op === "markPowerOff") controller.abort(new DOMException("deadline", "TimeoutError"));
  };
  return controller.signal;
}

describe("safety reproductions", () => {
  it("1a: a machine switched on by hand is no instance and survives DeleteNodes and DecreaseTargetSize", async () => {
    const w = new World({ on: ["worker-1"] });
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), []);
    await w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]);
    await assert.rejects(w.pool.decreaseTargetSize("workers", -1));
    assert.deepEqual(w.power.callsOf("turnOff"), []);
    assert.equal(w.reporter.of("powered-outside").length, 1);
  });

  it("1c: a machine plugpool switched on, with no Node, keeps its power while its power sensor gives no draw", async () => {
    const w = new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"], sensors: ["worker-1"] }] });
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    // It registered under another name and runs; its relay answers but its sensor does not.
    w.cluster.addNode({ name: "wroker-1", providerID: "k3s://wroker-1" });
    const read = w.power.read.bind(w.power);
    w.power.read = async (control) => ({ on: (await read(control)).on });
    await w.pool.refresh();
    await assert.rejects(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), /draw is not known/);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    // Once a reading gives its draw at standby, the cut goes ahead.
    w.power.read = read;
    w.power.setWatts(w.machine("worker-1").power, 2);
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]);
    assert.equal(w.power.isOn(w.machine("worker-1").power), false);
  });

  it("1d: a power sensor reading below -1 W is faulty: the machine with no Node keeps its power as if its draw were unknown", async () => {
    const w = new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"], sensors: ["worker-1"] }] });
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.cluster.addNode({ name: "wroker-1", providerID: "k3s://wroker-1" });
    w.power.setWatts(w.machine("worker-1").power, -500);
    await w.pool.refresh();
    await assert.rejects(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), /draw is not known/);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("1b: a machine plugpool switched on whose Node registered under another name keeps its power when it draws", async () => {
    const w = new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"], sensors: ["worker-1"] }] });
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.cluster.addNode({ name: "wroker-1", providerID: "k3s://wroker-1" });
    await w.pool.refresh();
    await assert.rejects(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), /draws 80 W with no Node/);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("2: the taint removed while the power-off is being recorded yields no power-off pod", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    await w.pool.refresh();
    w.cluster.onCall = (c) => {
      if (c.op === "markPowerOff") w.cluster.untaint("worker-1");
    };
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]).catch(() => undefined);
    await w.drive(20);
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("2b: a power-off whose Node lost the taint stops at its first step, before anything else is asked of the cluster", async () => {
    const w = await deletingWorker1();
    w.cluster.untaint("worker-1");
    const before = w.cluster.calls.length;
    await w.pool.reconcile();
    const first = w.reporter.of("power-off-step").find((e) => e.outcome === "failed");
    assert.equal(first?.step, "check-taint");
    assert.deepEqual(w.cluster.calls.slice(before).map((c) => c.op).filter((op) => op !== "deletePowerOffPod" && op !== "clearPowerOffMark"), []);
  });

  it("3a: the taint removed while the switch-off waits for the device is seen at the plug: nothing is sent", async () => {
    const w = new World({ on: ["worker-1", "worker-2"], lagging: true });
    w.registerTainted("worker-1");
    w.view?.sync();
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    await w.pool.reconcile();
    w.cluster.setReady("worker-1", false, w.clock.now());
    w.view?.sync();
    w.power.latency = () => 3;
    // The view still shows the taint: only the fresh read at the plug can know.
    w.power.onCall = (c) => {
      if (c.op === "turnOff") w.cluster.untaint("worker-1");
    };
    w.clock.advance(120_000);
    await w.pool.reconcile();
    assert.equal(w.power.callsOf("turnOff").length, 1);
    assert.ok(w.power.isOn(w.machine("worker-1").power), "refused at the plug");
    assert.equal(w.reporter.of("refused").at(-1)?.rule, "registered-without-taint");
  });

  it("3b: no power is cut while the cluster view is not known to be current", async () => {
    const w = await deletingWorker1();
    await w.pool.reconcile();
    w.cluster.setReady("worker-1", false, w.clock.now());
    w.cluster.viewCurrent = false;
    w.clock.advance(120_000);
    await w.pool.reconcile();
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    w.cluster.viewCurrent = true;
    await w.drive(20);
    assert.equal(w.power.isOn(w.machine("worker-1").power), false, "cut once the view is current again");
  });

  it("4: a DeleteNodes whose deadline ends while its power-off is recorded leaves nothing behind", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    await w.pool.refresh();
    const signal = deadlineAtRecord(w);
    const error: unknown = await w.pool.deleteNodes("workers", [w.ref("worker-1")], { signal }).catch((e: unknown) => e);
    assert.ok(isPlugpoolError(error) && error.code === "cancelled");
    w.cluster.onCall = undefined;
    await w.drive(20);
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations["plugpool.io/power-off-started-at"], undefined);
    assert.equal(w.reporter.of("power-off-started").length, 0);
  });

  it("4b: a DeleteNodes whose record fails on one machine starts nothing on another whose record landed, even if the runner passes meanwhile", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.register("worker-1");
    w.register("worker-2");
    await w.pool.refresh();
    w.cluster.taint("worker-1");
    w.cluster.taint("worker-2");
    const release = w.cluster.hold("markPowerOff", "worker-2");
    const call = w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]);
    await new Promise((resolve) => setImmediate(resolve));
    // worker-1's pending record is on its Node; worker-2's write is still out. The runner must not take
    // worker-1's record for one an earlier run left (it would start the power-off of a call that may yet fail).
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], `${w.clock.now()};pending`);
    await w.pool.reconcile();
    w.cluster.failNext("markPowerOff");
    release();
    await rejectsWith(call, "cluster-refused", /worker-2/);
    await w.drive();
    assert.deepEqual(w.reporter.of("power-off-started"), []);
    assert.equal(w.cluster.callsOf("createPowerOffPod").length, 0);
    assert.equal(w.power.callsOf("turnOff").length, 0);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], undefined, "its record undone");
    assert.deepEqual(
      w.pool.instances("workers").map((i) => i.state),
      ["running", "running"],
    );
  });

  it("4b2: a runner pass while a DeleteNodes is recording its power-offs neither starts nor undoes them: once the call succeeded, both run", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    w.registerTainted("worker-2");
    await w.pool.refresh();
    const release = w.cluster.hold("markPowerOff", "worker-2");
    const call = w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], `${w.clock.now()};pending`);
    await w.pool.reconcile();
    release();
    await call;
    await w.pool.reconcile();
    assert.deepEqual(w.reporter.of("power-off-started").map((e) => e.machine).toSorted(), ["worker-1", "worker-2"]);
    assert.deepEqual(w.reporter.of("power-off-aborted"), []);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], String(w.clock.now()), "committed by the power-off");
  });

  it("4c: a DeleteNodes whose deadline ends while its record is still on its way starts nothing when the record lands late", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    w.register("worker-2");
    await w.pool.refresh();
    const release = w.cluster.hold("markPowerOff", "worker-1");
    const signal = deadlineAtRecord(w);
    const error: unknown = await w.pool.deleteNodes("workers", [w.ref("worker-1")], { signal }).catch((e: unknown) => e);
    assert.ok(isPlugpoolError(error) && error.code === "cancelled");
    w.cluster.onCall = undefined;
    await w.drive(20);
    // The write that was out when the deadline passed lands now; the undo had waited for it.
    release();
    await w.drive(20);
    assert.deepEqual(w.reporter.of("power-off-started"), []);
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], undefined, "its record undone");
  });

  it("4d: the undo of a failed DeleteNodes clears its record even where a lagging view does not show it yet, and the view catching up resumes nothing", async () => {
    const w = new World({ on: ["worker-1", "worker-2"], lagging: true });
    w.registerTainted("worker-1");
    // A second Node claims worker-1 (its providerID): the record goes on both.
    w.cluster.addNode({ name: "worker-1-again", providerID: "k3s://worker-1", taints: [TAINT] });
    w.registerTainted("worker-2");
    w.view?.sync();
    await w.pool.refresh();
    w.cluster.failNext("markPowerOff", undefined, 2); // worker-1's records land, worker-2's is refused
    await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]), "cluster-refused", /worker-2/);
    await w.drive(20);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], undefined, "cleared on the apiserver");
    assert.equal(w.cluster.nodeNamed("worker-1-again")?.annotations[POWER_OFF_ANNOTATION], undefined, "on both Nodes");
    w.view?.sync();
    w.pool.clusterChanged();
    await w.drive(20);
    assert.deepEqual(w.reporter.of("power-off-started"), []);
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("4d2: the undo of a failed DeleteNodes waits for every write of the call, a machine's second Node's included", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    w.cluster.addNode({ name: "worker-1-again", providerID: "k3s://worker-1", taints: [TAINT] });
    w.register("worker-2");
    await w.pool.refresh();
    const release = w.cluster.hold("markPowerOff", "worker-1-again");
    w.cluster.failNext("markPowerOff"); // worker-1's write is refused; worker-1-again's is still out
    const call = rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1")]), "cluster-refused");
    for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
    await w.drive(5);
    assert.deepEqual(w.cluster.callsOf("clearPowerOffMark"), [], "nothing cleared while a write is out");
    release();
    await call;
    await w.drive(10);
    assert.equal(w.cluster.nodeNamed("worker-1-again")?.annotations[POWER_OFF_ANNOTATION], undefined, "cleared after it landed");
    assert.equal(w.reporter.of("power-off-aborted").length, 1);
    assert.deepEqual(w.reporter.of("power-off-started"), []);
  });

  it("4d3: a DeleteNodes after a restart, before the runner's first pass, takes up the power-off an earlier run committed instead of writing over it", async () => {
    const w = await deletingWorker1();
    await w.pool.reconcile(); // the record is committed and the power-off pod created
    const committed = w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION];
    assert.match(committed ?? "", /^\d+$/);
    w.restart();
    const writes = w.cluster.callsOf("markPowerOff").length;
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    assert.equal(w.cluster.callsOf("markPowerOff").length, writes, "no record of its own");
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], committed);
    assert.deepEqual(w.reporter.of("power-off-started").filter((e) => e.resumed).map((e) => e.machine), ["worker-1"]);
  });

  it("4e: a view that shows an aborted power-off's record only after the undo forgot it resumes nothing, and the abort is told once", async () => {
    const w = new World({ on: ["worker-1", "worker-2"], lagging: true });
    w.registerTainted("worker-1");
    w.register("worker-2");
    w.view?.sync();
    await w.pool.refresh();
    const startedAt = w.clock.now();
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    // The power-off commits its record; CA then cancels the scale-down (its taint goes) before the pod is created.
    w.cluster.onCall = (c) => {
      if (c.op === "markPowerOff") w.cluster.untaint("worker-1");
    };
    await w.drive(20);
    w.cluster.onCall = undefined;
    assert.equal(w.reporter.of("power-off-aborted").length, 1);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], undefined, "cleared on the apiserver");
    // The undo ran on a view that never showed the committed record, and forgot the job. Now the watch delivers
    // the Node as it was (record committed, taint on), its later changes still to come: the fake view jumps to
    // the truth, so the truth is set back to that moment.
    w.cluster.taint("worker-1");
    w.cluster.annotate("worker-1", POWER_OFF_ANNOTATION, String(startedAt));
    w.view?.sync();
    w.pool.clusterChanged();
    await w.drive(5);
    assert.deepEqual(w.reporter.of("power-off-started").filter((e) => e.resumed), [], "not resumed");
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    w.cluster.annotate("worker-1", POWER_OFF_ANNOTATION, undefined);
    w.view?.sync();
    await w.drive(20);
    assert.equal(w.reporter.of("power-off-aborted").length, 1, "one abort, told once");
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("4f: after a restart, a record left by a DeleteNodes that had not succeeded is undone, never resumed", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    w.registerTainted("worker-2");
    await w.pool.refresh();
    w.cluster.failNext("markPowerOff", undefined, 1);
    await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]), "cluster-refused");
    // The process restarts before its runner undid the record.
    w.restart();
    await w.drive(20);
    assert.deepEqual(w.reporter.of("power-off-started"), []);
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], undefined, "its record undone");
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("4g: a Node that went NotReady and is Ready again before the cut sends the power-off back to waiting; kept Ready, the machine keeps its power", async () => {
    const w = await deletingWorker1();
    await w.pool.reconcile(); // the power-off pod is created
    // A network blip: the node-lifecycle controller marks the Node NotReady for a while, then it reports Ready.
    w.cluster.setReady("worker-1", false, w.clock.now());
    await w.pool.reconcile();
    w.clock.advance(30_000);
    w.cluster.setReady("worker-1", true, w.clock.now());
    await w.drive(200);
    assert.deepEqual(w.power.callsOf("turnOff"), []);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.ok(w.reporter.of("power-off-step").some((e) => e.outcome === "waiting" && /worker-1 is Ready again/.test(e.detail)));
    assert.match(w.reporter.of("power-off-aborted")[0]?.reason ?? "", /did not go NotReady within/);
  });

  it("4h: after a Node was Ready again, the grace counts anew from its next NotReady", async () => {
    const w = await deletingWorker1();
    await w.pool.reconcile();
    w.cluster.setReady("worker-1", false, w.clock.now());
    await w.pool.reconcile();
    w.clock.advance(100_000);
    w.cluster.setReady("worker-1", true, w.clock.now());
    await w.pool.reconcile();
    w.clock.advance(10_000);
    const down = w.clock.now();
    w.cluster.setReady("worker-1", false, down);
    let cutAt: number | undefined;
    w.power.onArrival = (c) => {
      if (c.op === "turnOff") cutAt = w.clock.now();
    };
    await w.drive(50);
    assert.equal(cutAt, down + 120_000, "the grace counted from the second NotReady");
  });

  it("4i: a Node Ready again while the cut waits at the plug is refused there, and the power-off goes back to waiting", async () => {
    const w = await deletingWorker1();
    await w.pool.reconcile();
    w.cluster.setReady("worker-1", false, w.clock.now());
    w.clock.advance(120_000);
    w.power.onCall = (c) => {
      if (c.op === "turnOff") w.cluster.setReady("worker-1", true, w.clock.now());
    };
    await w.drive(5);
    w.power.onCall = undefined;
    assert.equal(w.power.callsOf("turnOff").length, 1, "the cut was asked for");
    assert.ok(w.power.isOn(w.machine("worker-1").power), "and refused at the plug");
    const steps = w.reporter.of("power-off-step");
    assert.ok(steps.some((e) => e.step === "plug-off" && e.outcome === "failed" && /node worker-1 is Ready again/.test(e.detail)));
    assert.ok(steps.some((e) => e.step === "await-not-ready" && e.outcome === "waiting" && /Ready again/.test(e.detail)));
    assert.deepEqual(w.reporter.of("power-off-aborted"), [], "not given up: back to waiting for the shutdown");
  });

  it("4k: a machine whose plug was read off during its power-off, then switched on by hand with its Node Ready, is not cut", async () => {
    const w = await plugOffAndOnAgainMidPowerOff();
    const plug = w.machine("worker-1").power;
    w.cluster.setReady("worker-1", false, w.clock.now());
    w.clock.advance(1_000);
    w.cluster.setReady("worker-1", true, w.clock.now());
    await w.pool.refresh();
    await w.drive(200);
    assert.ok(w.power.isOn(plug));
    assert.equal(w.power.callsOf("turnOff").length, 0);
  });

  it("4j: a BMC's OS shutdown is not sent once the taint is gone while it waited at the BMC", async () => {
    const w = new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"], shutsDown: ["worker-1"] }], on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    w.register("worker-2");
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    // The request waits its turn at the BMC; CA cancels the scale-down meanwhile and removes its taint.
    w.power.latency = () => 3;
    w.power.onCall = (c) => {
      if (c.op === "shutdown") w.cluster.untaint("worker-1");
    };
    await w.pool.reconcile();
    assert.deepEqual(w.power.callsOf("shutdown").length, 1, "the shutdown was asked for");
    assert.deepEqual(w.power.shutdownsAccepted, [], "and refused at the BMC");
    assert.equal(w.reporter.of("refused")[0]?.rule, "registered-without-taint");
  });

  it("5a: a failed or stuck power-off pod is replaced, a bounded number of times, then the power is kept", async () => {
    const w = await deletingWorker1();
    await w.pool.reconcile();
    for (let attempt = 0; attempt < 4; attempt++) {
      const pod = w.cluster.powerOffPod("worker-1");
      if (pod !== undefined) w.cluster.addPod({ ...pod, ...(attempt % 2 === 0 ? { phase: "Failed" } : { stuck: "ImagePullBackOff" }) });
      await w.drive(20);
    }
    assert.equal(w.cluster.callsOf("createPowerOffPod").length, 3);
    assert.match(w.reporter.of("power-off-aborted")[0]?.reason ?? "", /after 3 attempts/);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("5b: a Node deleted by someone else mid-power-off is no sign of a shutdown: no cut", async () => {
    const w = await deletingWorker1();
    w.cluster.removeNode("worker-1");
    await w.drive(200);
    assert.deepEqual(w.power.callsOf("turnOff"), []);
    assert.equal(w.reporter.of("power-off-aborted").length, 1);
  });

  it("5c: a Node deleted while its DeleteNodes is being recorded still counts as registered: no cut without a shutdown", async () => {
    const w = new World({ on: ["worker-1"] });
    w.registerTainted("worker-1");
    await w.pool.refresh();
    // The Node goes while the power-off's record is out; the view has caught up by the time the call ends.
    w.cluster.onCall = (c) => {
      if (c.op === "markPowerOff") w.cluster.removeNode("worker-1");
    };
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    assert.equal(w.reporter.of("power-off-started")[0]?.node, "worker-1", "begun on the Node it was asked for");
    await w.drive(200);
    assert.deepEqual(w.power.callsOf("turnOff"), []);
    assert.match(w.reporter.of("power-off-aborted")[0]?.reason ?? "", /did not go NotReady/);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("5d: a Node gone from the apiserver counts as vanished at the cut even while a lagging view still shows it", async () => {
    const w = new World({ on: ["worker-1"], lagging: true });
    w.registerTainted("worker-1");
    w.cluster.setReady("worker-1", false, w.clock.now());
    w.view?.sync();
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    await w.pool.reconcile();
    assert.equal(w.reporter.of("power-off-step").find((e) => e.step === "await-not-ready")?.outcome, "done", "taken for down");
    // It comes back Ready (the taint kept), and its Node is then deleted by hand; the view has not caught up.
    w.cluster.setReady("worker-1", true, w.clock.now());
    w.view?.sync();
    w.cluster.removeNode("worker-1");
    await w.drive(200);
    assert.deepEqual(w.power.callsOf("turnOff"), []);
    assert.equal(w.reporter.of("refused")[0]?.rule, "node-vanished");
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("6: two Nodes claiming one machine must both allow the power-off; the duplicate is reported", async () => {
    const w = new World({ on: ["worker-1"] });
    w.cluster.addNode({ name: "worker-1", providerID: "k3s://worker-1", taints: [TAINT] });
    w.cluster.addNode({ name: "worker-1-old", providerID: "k3s://worker-1" });
    await w.pool.refresh();
    assert.deepEqual(w.reporter.of("duplicate-nodes")[0]?.nodes, ["worker-1", "worker-1-old"]);
    await assert.rejects(w.pool.deleteNodes("workers", [w.ref("worker-1")]), /worker-1-old .*without the ToBeDeleted/);
    await w.drive(20);
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    assert.deepEqual(w.power.callsOf("turnOff"), []);
  });

  it("8: a switch-off whose answer was lost is not taken for no cut: no restore, no abort, the Node is not deleted while Ready and untainted", async () => {
    const w = await deletingWorker1();
    await w.pool.reconcile();
    w.cluster.setReady("worker-1", false, w.clock.now());
    w.clock.advance(120_000);
    w.power.loseNextAnswer("turnOff");
    await w.pool.reconcile();
    assert.equal(w.power.isOn(w.machine("worker-1").power), false, "the cut went through");
    // The taint goes and the node reports Ready a last time before it stops.
    w.cluster.untaint("worker-1");
    w.cluster.setReady("worker-1", true, w.clock.now());
    await w.pool.refresh();
    await w.drive(20);
    assert.deepEqual(w.power.callsOf("turnOn"), []);
    assert.equal(w.reporter.of("power-off-aborted").length, 0);
    assert.equal(w.reporter.of("node-deleted").length, 0);
  });

  it("9: a switch-on whose answer was lost counts as plugpool's power-on: one machine for +1", async () => {
    const w = new World();
    await w.pool.refresh();
    w.power.loseNextAnswer("turnOn");
    await w.pool.increaseSize("workers", 1);
    assert.equal(w.power.callsOf("turnOn").length, 1);
    assert.equal(w.pool.targetSize("workers"), 1);
    assert.deepEqual(w.pool.instances("workers"), [{ id: "k3s://worker-1", state: "creating" }]);
    await w.pool.refresh();
    assert.deepEqual(w.pool.poweredOutside(), []);
  });
});
