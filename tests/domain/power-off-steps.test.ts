// Each step of the power-off saga on its own: a domain context over the world's fakes, a job whose facts the test
// sets, and the step's outcome (its detail or why, as the runner reports it in "power-off-step" events), the facts
// it leaves and what it did to the plug and the cluster. The runner's walk over the steps is in power-off.test.ts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { PoolDeps, PowerRecords, PowerSwitch } from "../../src/domain/index.ts";
import { formatPowerOffRecord, POWER_OFF_ANNOTATION, TO_BE_DELETED_TAINT } from "../../src/domain/index.ts";
import type { PowerOffStep } from "../../src/domain/events.ts";
import { POWER_OFF_STEPS, type StepOutcome } from "../../src/domain/power-off-steps.ts";
import { createContext, type PoolContext } from "../../src/domain/context.ts";
import { beginPowerOff, readingArrived, readStarted, stateOf, switchAnswered, type MachineView } from "../../src/domain/lifecycle.ts";
import { newJob, nodeDeleted, type PowerOffFacts, type PowerOffJob, type PowerOffRun } from "../../src/domain/power-off-job.ts";
import { PREFIX, World, type WorldOptions } from "../harness/fakes/world.ts";
import { rejectsWith } from "../harness/fakes/assertions.ts";

/** The fake clock's time at the start. */
const T0 = 1_800_000_000_000;

/** A world, a context over its fakes (as the pool builds it) and a power-off job of worker-1 in its memory. */
interface Rig {
  readonly w: World;
  readonly ctx: PoolContext;
  readonly job: PowerOffJob;
  readonly st: MachineView;
  /** The machines whose records the steps waited to be stored (`PowerRecords.stored`), in order. */
  readonly stored: string[];
}

/** What plugpool remembers of worker-1's plug, as a reading leaves it (whatever the plug says now). */
function remember(r: Rig, on: boolean): void {
  const machine = r.w.machine("worker-1");
  assert.deepEqual(readingArrived(r.ctx, machine, readStarted(r.ctx, machine), { on }), { on });
}

/** What a job remembers of the Node whose OS it asked to shut down, as an earlier pass would have left it. */
function rememberShutdownNode(job: PowerOffJob, uid: string | undefined): void {
  (job as { shutdownNodeUid: string | undefined }).shutdownNodeUid = uid;
}

interface RigOptions {
  readonly world?: WorldOptions;
  /** The job as it stands (absent: started at the clock's time on Node worker-1, nothing established). */
  readonly job?: Partial<PowerOffRun>;
  readonly facts?: PowerOffFacts;
  /** The power switch the context gets (absent: the world's). */
  readonly power?: (w: World) => PowerSwitch;
  /** Sets up the world's cluster and plugs before the context is built. */
  readonly before?: (w: World) => void;
}

function rig(options: RigOptions = {}): Rig {
  const w = new World(options.world);
  options.before?.(w);
  const stored: string[] = [];
  const r = w.records;
  const records: PowerRecords = {
    powerOn: (m) => r.powerOn(m),
    recordPowerOn: (m, rec) => r.recordPowerOn(m, rec),
    endPowerOn: (m) => { r.endPowerOn(m); },
    quarantine: (m) => r.quarantine(m),
    setQuarantine: (m, q) => { r.setQuarantine(m, q); },
    deviceIdentity: (m) => r.deviceIdentity(m),
    recordDeviceIdentity: (m, id) => r.recordDeviceIdentity(m, id),
    stored: async (m) => {
      stored.push(m);
      await r.stored(m);
    },
  };
  const deps: PoolDeps = {
    clock: w.clock,
    power: options.power?.(w) ?? w.power,
    cluster: w.view ?? w.cluster,
    lookup: w.cluster,
    teardown: w.cluster,
    records,
    reporter: w.reporter,
  };
  const ctx = createContext(deps, w.config);
  const job: PowerOffJob = { ...newJob("worker-1", w.clock.now()), facts: { ...options.facts }, ...options.job };
  const machine = w.machine("worker-1");
  beginPowerOff(ctx, machine, job);
  return { w, ctx, job, st: stateOf(ctx, machine), stored };
}

/** Runs one step of worker-1's power-off at `now` (default: the clock's time). */
function run(r: Rig, step: PowerOffStep, now = r.w.clock.now()): Promise<StepOutcome> {
  const spec = POWER_OFF_STEPS.find((s) => s.name === step);
  if (spec === undefined) throw new Error(`no step ${step}`);
  return spec.run({ pool: r.ctx, machine: r.w.machine("worker-1"), job: r.job, now });
}

const plugOf = (w: World): ReturnType<World["machine"]>["power"] => w.machine("worker-1").power;

/** worker-1's device was met before, and now its address answers as another device. */
function swappedDevice(w: World): void {
  w.records.seedDeviceIdentity("worker-1", w.power.identityOf(plugOf(w)));
  w.power.replaceDevice(plugOf(w), "device other");
}

const SENSOR: WorldOptions = { groups: [{ id: "workers", machines: ["worker-1", "worker-2"], sensors: ["worker-1"] }] };
const BMC: WorldOptions = { groups: [{ id: "workers", machines: ["worker-1", "worker-2"], shutsDown: ["worker-1"], backends: { "worker-1": "redfish" } }] };

describe("power-off step check-taint", () => {
  it("commits the record on the tainted Node, once, and says the Node carries the taint", async () => {
    const r = rig({ world: { on: ["worker-1"] }, job: { startedAt: T0 - 5000 }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(r, "check-taint"), { kind: "done", detail: "node carries the ToBeDeleted taint" });
    assert.deepEqual(r.w.cluster.callsOf("markPowerOff"), [{ op: "markPowerOff", target: "worker-1" }]);
    assert.equal(r.w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], String(T0 - 5000));
    assert.equal(r.job.facts.recordCommitted, T0);
    // The view now shows the record committed: nothing is written again.
    r.w.clock.advance(1000);
    assert.deepEqual(await run(r, "check-taint"), { kind: "done", detail: "node carries the ToBeDeleted taint" });
    assert.equal(r.w.cluster.callsOf("markPowerOff").length, 1);
    assert.equal(r.job.facts.recordCommitted, T0, "committed when first written");
  });

  it("writes nothing for a machine that never had a Node, and says there is none", async () => {
    const r = rig({ job: { node: "" } });
    assert.deepEqual(await run(r, "check-taint"), { kind: "done", detail: "no node" });
    assert.deepEqual(r.w.cluster.callsOf("markPowerOff"), []);
    assert.equal(r.job.facts.recordCommitted, T0);
  });

  it("writes the record to the job's Node the view does not show yet, and only on the first pass", async () => {
    const r = rig({ world: { lagging: true }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(r, "check-taint"), { kind: "done", detail: "no node" });
    assert.deepEqual(r.w.cluster.callsOf("markPowerOff"), [{ op: "markPowerOff", target: "worker-1" }]);
    assert.equal(r.w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], String(T0));
    r.w.cluster.annotate("worker-1", POWER_OFF_ANNOTATION, undefined);
    await run(r, "check-taint");
    assert.equal(r.w.cluster.callsOf("markPowerOff").length, 1, "committed already: a view still behind is no reason to write again");
  });

  it("leaves a Node that shows this very record committed alone", async () => {
    const r = rig({
      before: (w) => {
        w.registerTainted("worker-1");
        w.cluster.annotate("worker-1", POWER_OFF_ANNOTATION, formatPowerOffRecord({ startedAt: T0, pending: false }));
      },
    });
    assert.deepEqual(await run(r, "check-taint"), { kind: "done", detail: "node carries the ToBeDeleted taint" });
    assert.deepEqual(r.w.cluster.callsOf("markPowerOff"), []);
    assert.equal(r.job.facts.recordCommitted, T0);
  });

  for (const [shown, what] of [
    [{ startedAt: T0 - 60_000, pending: false }, "another power-off's record"],
    [{ startedAt: T0, pending: true }, "this record still pending"],
  ] as const) {
    it(`commits the record over ${what}`, async () => {
      const r = rig({
        before: (w) => {
          w.registerTainted("worker-1");
          w.cluster.annotate("worker-1", POWER_OFF_ANNOTATION, formatPowerOffRecord(shown));
        },
      });
      await run(r, "check-taint");
      assert.deepEqual(r.w.cluster.callsOf("markPowerOff"), [{ op: "markPowerOff", target: "worker-1" }]);
      assert.equal(r.w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], String(T0));
    });
  }

  it("commits the record on a second Node that claims the machine, and on the job's Node the view no longer shows", async () => {
    const r = rig({
      before: (w) => {
        w.cluster.addNode({ name: "host-b", providerID: PREFIX + "worker-1", taints: [{ key: "ToBeDeletedByClusterAutoscaler", value: "1", effect: "NoSchedule" }] });
      },
    });
    assert.deepEqual(await run(r, "check-taint"), { kind: "done", detail: "node carries the ToBeDeleted taint" });
    assert.deepEqual(r.w.cluster.callsOf("markPowerOff").map((c) => c.target), ["host-b", "worker-1"]);
  });

  for (const fact of ["plugOff", "cutUnconfirmed"] as const) {
    it(`checks and writes nothing once the power may be cut (${fact})`, async () => {
      // The Node lost its taint: before the cut that would stop the power-off.
      const r = rig({ facts: { [fact]: T0 - 1000 }, before: (w) => { w.register("worker-1"); } });
      assert.deepEqual(await run(r, "check-taint"), { kind: "done", detail: "power may already be cut" });
      assert.deepEqual(r.w.cluster.callsOf("markPowerOff"), []);
      assert.equal(r.job.facts.recordCommitted, undefined);
    });
  }

  it("stops the power-off, keeping the power, when the Node lost the taint", async () => {
    const r = rig({ before: (w) => { w.register("worker-1"); } });
    assert.deepEqual(await run(r, "check-taint"), {
      kind: "abort",
      reason: "keeping power: node worker-1 is registered without the ToBeDeletedByClusterAutoscaler taint",
      rule: "registered-without-taint",
    });
    assert.deepEqual(r.w.cluster.callsOf("markPowerOff"), []);
  });
});

describe("power-off step power-off-pod", () => {
  it("asks for nothing once the shutdown was requested, naming how", async () => {
    const pod = rig({ facts: { shutdownRequested: T0 - 1000 }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(pod, "power-off-pod"), { kind: "done", detail: "power-off pod created" });
    assert.deepEqual(pod.w.cluster.callsOf("createPowerOffPod"), []);
    const bmc = rig({ world: BMC, facts: { shutdownRequested: T0 - 1000 }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(bmc, "power-off-pod"), { kind: "done", detail: "OS shutdown requested" });
    assert.deepEqual(bmc.w.power.calls, []);
  });

  it("creates no pod once the power-off pod was removed", async () => {
    const r = rig({ world: { on: ["worker-1"] }, facts: { podRemoved: T0 - 1000 }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "power-off pod created" });
    assert.deepEqual(r.w.cluster.callsOf("createPowerOffPod"), []);
    assert.deepEqual(r.w.cluster.pods(), []);
  });

  it("waits for an earlier power-off pod that is terminating to go", async () => {
    const r = rig({
      before: (w) => {
        w.registerTainted("worker-1");
        w.cluster.addPod({ machine: "worker-1", nodeName: "worker-1", startedAt: T0 - 60_000, phase: "Running", terminating: true });
      },
    });
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "wait", afterMs: 1000, why: "waiting for an earlier power-off pod to go" });
    assert.deepEqual(r.w.cluster.callsOf("createPowerOffPod"), []);
    assert.equal(r.job.facts.shutdownRequested, undefined);
  });

  it("resumes the power-off pod an earlier run created: the shutdown of that Node counts as asked now", async () => {
    const r = rig({
      before: (w) => {
        w.registerTainted("worker-1");
        w.cluster.addPod({ machine: "worker-1", nodeName: "worker-1", startedAt: T0 - 60_000, phase: "Running", terminating: false });
      },
    });
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "power-off pod exists" });
    assert.deepEqual(r.w.cluster.callsOf("createPowerOffPod"), []);
    assert.equal(r.job.podAttempts, 1);
    assert.equal(r.job.facts.shutdownRequested, T0);
    assert.equal(r.job.shutdownNodeUid, r.w.cluster.nodeNamed("worker-1")?.uid);
  });

  it("resumes an earlier power-off pod whose Node is gone, knowing no Node it shut down", async () => {
    const r = rig({
      before: (w) => { w.cluster.addPod({ machine: "worker-1", nodeName: "worker-1", startedAt: T0 - 60_000, phase: "Running", terminating: false }); },
    });
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "power-off pod exists" });
    assert.equal(r.job.podAttempts, 1);
    assert.equal(r.job.facts.shutdownRequested, T0);
    assert.equal(r.job.shutdownNodeUid, undefined);
  });

  it("creates its pod anew when one it replaces still shows (not its first attempt)", async () => {
    const r = rig({
      world: { on: ["worker-1"] },
      job: { podAttempts: 1 },
      before: (w) => {
        w.registerTainted("worker-1");
        w.cluster.addPod({ machine: "worker-1", nodeName: "worker-1", startedAt: T0, phase: "Pending", terminating: false });
      },
    });
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "power-off pod created on worker-1" });
    assert.deepEqual(r.w.cluster.callsOf("createPowerOffPod"), [{ op: "createPowerOffPod", target: "worker-1" }]);
    assert.equal(r.job.podAttempts, 2);
    assert.equal(r.job.facts.shutdownRequested, T0);
  });

  it("keeps the Node's Ready condition as read fresh right before the pod, and none for an earlier run's pod", async () => {
    const r = rig({ world: { on: ["worker-1"] }, before: (w) => { w.registerTainted("worker-1"); } });
    const changedAt = r.w.cluster.nodeNamed("worker-1")?.readyChangedAt;
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "power-off pod created on worker-1" });
    assert.deepEqual(r.job.shutdownNodeReady, { ready: true, changedAt });
    const adopted = rig({
      world: { on: ["worker-1"] },
      before: (w) => {
        w.registerTainted("worker-1");
        w.cluster.addPod({ machine: "worker-1", nodeName: "worker-1", startedAt: T0 - 60_000, phase: "Running", terminating: false });
      },
    });
    assert.deepEqual(await run(adopted, "power-off-pod"), { kind: "done", detail: "power-off pod exists" });
    assert.equal(adopted.job.shutdownNodeReady, undefined);
  });

  it("keeps the Ready condition of the Node the pod goes on, not of another Node that claims the machine", async () => {
    const r = rig({
      world: { on: ["worker-1"] },
      before: (w) => {
        w.registerTainted("worker-1");
        w.cluster.addNode({ name: "worker-1.old", providerID: PREFIX + "worker-1", ready: false, readyChangedAt: T0 - 90_000, taints: [{ key: TO_BE_DELETED_TAINT, value: "", effect: "NoSchedule" }] });
      },
    });
    const changedAt = r.w.cluster.nodeNamed("worker-1")?.readyChangedAt;
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "power-off pod created on worker-1" });
    assert.deepEqual(r.job.shutdownNodeReady, { ready: true, changedAt });
  });

  it("keeps the Node NotReady at the request when the apiserver has it so and the view still shows it Ready", async () => {
    const r = rig({ world: { on: ["worker-1"], lagging: true }, before: (w) => { w.registerTainted("worker-1"); w.view?.sync(); } });
    r.w.cluster.setReady("worker-1", false, T0 - 30_000);
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "power-off pod created on worker-1" });
    assert.deepEqual(r.job.shutdownNodeReady, { ready: false, changedAt: T0 - 30_000 });
  });

  it("creates the pod on the Node and counts the attempt", async () => {
    const r = rig({ world: { on: ["worker-1"] }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "power-off pod created on worker-1" });
    assert.deepEqual(r.w.cluster.pods(), [{ machine: "worker-1", nodeName: "worker-1", startedAt: T0, phase: "Pending", terminating: false }]);
    assert.equal(r.job.podAttempts, 1);
    assert.equal(r.job.shutdownNodeUid, r.w.cluster.nodeNamed("worker-1")?.uid);
  });

  it("asks nothing when there is no Node to shut down, when it is NotReady already, or when the plug is remembered off", async () => {
    const none = rig();
    assert.deepEqual(await run(none, "power-off-pod"), { kind: "done", detail: "no node to shut down" });
    const notReady = rig({ before: (w) => { w.registerTainted("worker-1"); w.cluster.setReady("worker-1", false, T0 - 1000); } });
    assert.deepEqual(await run(notReady, "power-off-pod"), { kind: "done", detail: "node already NotReady" });
    const off = rig({ before: (w) => { w.registerTainted("worker-1"); } });
    remember(off, false);
    assert.deepEqual(await run(off, "power-off-pod"), { kind: "done", detail: "plug already off" });
    for (const r of [none, notReady, off]) {
      assert.deepEqual(r.w.cluster.callsOf("createPowerOffPod"), []);
      assert.equal(r.job.facts.shutdownRequested, undefined);
    }
  });

  it("judges the shutdown as a shutdown: a Ready Node after the plug read off once is no reason to hold it back", async () => {
    // The plug read off with the Node Ready, then on again: the OS still runs and gets its power-off pod.
    const r = rig({ world: { on: ["worker-1"] }, facts: { notReady: T0 - 2000, powerSeenOff: T0 - 2000 }, before: (w) => { w.registerTainted("worker-1"); } });
    remember(r, true);
    assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "power-off pod created on worker-1" });
    assert.equal(r.w.cluster.pods().length, 1);
  });

  describe("of a machine whose control shuts the OS down (a BMC)", () => {
    it("fails, asking nothing, when the power switch cannot shut down", async () => {
      const r = rig({
        world: BMC,
        before: (w) => { w.registerTainted("worker-1"); },
        power: (w) => ({ read: (c, o) => w.power.read(c, o), turnOn: (c, o) => w.power.turnOn(c, o), turnOff: (c, g, o) => w.power.turnOff(c, g, o) }),
      });
      await rejectsWith(run(r, "power-off-pod"), "internal", /^the power switch cannot shut down worker-1 through its control$/);
      assert.equal(r.job.facts.shutdownRequested, undefined);
    });

    it("stops the power-off when the control's address answers as another device", async () => {
      const r = rig({ world: BMC, before: (w) => { w.registerTainted("worker-1"); swappedDevice(w); } });
      assert.deepEqual(await run(r, "power-off-pod"), {
        kind: "abort",
        reason: "keeping power: shutdown of plug of worker-1: the device answered as device other; nothing sent",
        rule: "device-mismatch",
      });
      assert.deepEqual(r.w.power.shutdownsAccepted, []);
      assert.equal(r.job.facts.shutdownRequested, undefined);
    });

    it("retries (throws) when the control cannot be reached", async () => {
      const r = rig({ world: BMC, before: (w) => { w.registerTainted("worker-1"); w.power.failNext("shutdown"); } });
      await rejectsWith(run(r, "power-off-pod"), "plug-unreachable", /^shutdown of \(next\): timed out$/);
      assert.equal(r.job.facts.shutdownRequested, undefined);
    });

    it("retries (throws) a request that failed after the verdict allowed it: no refusal", async () => {
      const r = rig({
        world: BMC,
        before: (w) => { w.registerTainted("worker-1"); },
        power: (w) => ({
          read: (c, o) => w.power.read(c, o),
          turnOn: (c, o) => w.power.turnOn(c, o),
          turnOff: (c, g, o) => w.power.turnOff(c, g, o),
          shutdown: async (_c, mayShutDown) => {
            assert.equal(await mayShutDown(), true);
            throw new Error("the BMC dropped the connection");
          },
        }),
      });
      await assert.rejects(run(r, "power-off-pod"), /^Error: the BMC dropped the connection$/);
      assert.equal(r.job.facts.shutdownRequested, undefined);
    });

    it("asks the control and names it", async () => {
      const r = rig({ world: BMC, before: (w) => { w.registerTainted("worker-1"); } });
      assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "OS shutdown of worker-1 requested through plug of worker-1" });
      assert.deepEqual(r.w.power.shutdownsAccepted, ["plug-worker-1"]);
      assert.equal(r.job.facts.shutdownRequested, T0);
    });

    it("keeps the Node's Ready condition as read fresh inside the control's slot, right before the request", async () => {
      const r = rig({ world: { ...BMC, lagging: true }, before: (w) => { w.registerTainted("worker-1"); w.view?.sync(); } });
      r.w.cluster.setReady("worker-1", false, T0 - 30_000);
      assert.deepEqual(await run(r, "power-off-pod"), { kind: "done", detail: "OS shutdown of worker-1 requested through plug of worker-1" });
      assert.deepEqual(r.job.shutdownNodeReady, { ready: false, changedAt: T0 - 30_000 });
    });
  });
});

describe("power-off step await-not-ready", () => {
  it("watches only the Node whose shutdown this job asked for", async () => {
    // A pod being replaced: the request is withdrawn, the Node it was made on is remembered.
    const before = (w: World): void => { w.registerTainted("worker-1"); w.cluster.setReady("worker-1", false, T0 + 3000); };
    const withdrawn = rig({ before });
    rememberShutdownNode(withdrawn.job, withdrawn.w.cluster.nodeNamed("worker-1")?.uid);
    assert.deepEqual(await run(withdrawn, "await-not-ready", T0 + 4000), { kind: "done", detail: "node NotReady" });
    assert.equal(withdrawn.job.facts.notReady, T0 + 3000);
    assert.deepEqual(withdrawn.job.shutdownNodeSeen, { notReadyAt: undefined, readyAgain: false });

    const asked = rig({ facts: { shutdownRequested: T0 }, before });
    rememberShutdownNode(asked.job, asked.w.cluster.nodeNamed("worker-1")?.uid);
    await run(asked, "await-not-ready", T0 + 4000);
    assert.deepEqual(asked.job.shutdownNodeSeen, { notReadyAt: T0 + 3000, readyAgain: false });
  });

  it("stays done while the Node stays NotReady, and after a hard cut whatever it shows", async () => {
    const notReady = rig({ facts: { notReady: T0 - 5000 }, before: (w) => { w.registerTainted("worker-1"); w.cluster.setReady("worker-1", false, T0 - 5000); } });
    assert.deepEqual(await run(notReady, "await-not-ready"), { kind: "done", detail: "node NotReady" });
    const hard = rig({ facts: { notReady: T0 - 5000, hardCut: T0 - 5000 }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(hard, "await-not-ready"), { kind: "done", detail: "hard cut" });
    assert.deepEqual(hard.job.facts, { notReady: T0 - 5000, hardCut: T0 - 5000 });
  });

  it("waits for the shutdown anew when the Node is Ready again, reading no plug that was not seen off", async () => {
    const r = rig({
      facts: { shutdownRequested: T0 - 10_000, notReady: T0 - 5000, graceElapsed: T0 - 1000, standby: T0 - 3000, standbyReached: T0 - 1000 },
      before: (w) => { w.registerTainted("worker-1"); },
    });
    assert.deepEqual(await run(r, "await-not-ready"), { kind: "wait", afterMs: 5000, why: "waiting for the node to go NotReady" });
    assert.deepEqual(r.job.facts, { shutdownRequested: T0 - 10_000 });
    assert.deepEqual(r.w.power.calls, []);
    assert.deepEqual(r.w.reporter.of("power-off-step"), [
      { type: "power-off-step", machine: "worker-1", step: "await-not-ready", outcome: "waiting", detail: "node worker-1 is Ready again; waiting for the shutdown anew" },
    ]);
  });

  it("takes a Node still Ready for one that lost its power when the plug seen off reads off again", async () => {
    const r = rig({ facts: { notReady: T0 - 5000, powerSeenOff: T0 - 5000 }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(r, "await-not-ready"), { kind: "done", detail: "plug reads off" });
    assert.equal(r.job.facts.plugOff, T0);
    assert.deepEqual(r.w.reporter.of("power-off-step"), []);
  });

  it("does not take the relay of another device for the machine's: a plug seen off that answers as another device may have power", async () => {
    const r = rig({ facts: { notReady: T0 - 5000, powerSeenOff: T0 - 5000 }, before: (w) => { w.registerTainted("worker-1"); swappedDevice(w); } });
    assert.deepEqual(await run(r, "await-not-ready"), { kind: "wait", afterMs: 5000, why: "waiting for the node to go NotReady" });
    assert.deepEqual(r.job.facts, {});
    assert.equal(r.w.reporter.of("device-mismatch").length, 1);
  });

  for (const fact of ["plugOff", "cutUnconfirmed"] as const) {
    it(`is done once the power may be cut (${fact}), the grace counting from now`, async () => {
      const r = rig({ facts: { [fact]: T0 - 1000 }, before: (w) => { w.registerTainted("worker-1"); } });
      assert.deepEqual(await run(r, "await-not-ready"), { kind: "done", detail: "plug already off" });
      assert.equal(r.job.facts.notReady, T0);
    });
  }

  it("waits while any Node of the machine is still Ready", async () => {
    const r = rig({
      before: (w) => {
        w.registerTainted("worker-1");
        w.cluster.setReady("worker-1", false, T0 - 1000);
        w.cluster.addNode({ name: "host-b", providerID: PREFIX + "worker-1", taints: [{ key: "ToBeDeletedByClusterAutoscaler", value: "1", effect: "NoSchedule" }] });
      },
    });
    assert.deepEqual(await run(r, "await-not-ready"), { kind: "wait", afterMs: 5000, why: "waiting for the node to go NotReady" });
    assert.equal(r.job.facts.notReady, undefined);
  });

  it("takes the time the Node went NotReady, or now when it does not say", async () => {
    const r = rig({ before: (w) => { w.registerTainted("worker-1"); w.cluster.setReady("worker-1", false, T0 - 7000); } });
    assert.deepEqual(await run(r, "await-not-ready"), { kind: "done", detail: "node NotReady" });
    assert.equal(r.job.facts.notReady, T0 - 7000);
  });

  it("has nothing to wait for when the power-off began with no Node", async () => {
    const r = rig({ job: { node: "" } });
    assert.deepEqual(await run(r, "await-not-ready"), { kind: "done", detail: "no node" });
    assert.equal(r.job.facts.notReady, T0);
  });

  it("waits for a Node that registered after a power-off begun with none, as for any other", async () => {
    const r = rig({ job: { node: "" }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(r, "await-not-ready"), { kind: "wait", afterMs: 5000, why: "waiting for the node to go NotReady" });
    assert.deepEqual(r.job.facts, {});
  });

  it("waits on when the Node vanished: no sign of a shutdown", async () => {
    const r = rig();
    assert.deepEqual(await run(r, "await-not-ready"), { kind: "wait", afterMs: 5000, why: "waiting for the node to go NotReady" });
    assert.deepEqual(r.job.facts, {});
  });

  it("takes a plug remembered off for no power only when a reading taken now says so", async () => {
    const on = rig({ world: { on: ["worker-1"] }, before: (w) => { w.registerTainted("worker-1"); } });
    remember(on, false);
    assert.deepEqual(await run(on, "await-not-ready"), { kind: "wait", afterMs: 5000, why: "waiting for the node to go NotReady" });
    assert.equal(on.w.power.callsOf("read").length, 1);
    const off = rig({ before: (w) => { w.registerTainted("worker-1"); } });
    remember(off, false);
    assert.deepEqual(await run(off, "await-not-ready"), { kind: "done", detail: "plug reads off" });
    assert.deepEqual(off.job.facts, { notReady: T0, powerSeenOff: T0 });
  });

  it("waits no longer than the deadline", async () => {
    const r = rig({ before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(r, "await-not-ready", T0 + 297_000), { kind: "wait", afterMs: 3000, why: "waiting for the node to go NotReady" });
  });

  describe("with a power-off pod in trouble", () => {
    const pod = (phase: "Pending" | "Failed", terminating: boolean, stuck?: string) => (w: World): void => {
      w.registerTainted("worker-1");
      w.cluster.addPod({ machine: "worker-1", nodeName: "worker-1", startedAt: T0, phase, terminating, ...(stuck === undefined ? {} : { stuck }) });
    };

    for (const [trouble, setup] of [
      ["failed", pod("Failed", false)],
      ["is terminating", pod("Pending", true)],
      ["ImagePullBackOff", pod("Pending", false, "ImagePullBackOff")],
    ] as const) {
      it(`deletes the pod to replace it when it ${trouble}, counting the attempt`, async () => {
        const r = rig({ job: { podAttempts: 1 }, facts: { shutdownRequested: T0 }, before: setup });
        assert.deepEqual(await run(r, "await-not-ready", T0 + 10_000), {
          kind: "retry",
          error: `the power-off pod ${trouble}; replacing it (attempt 2 of 3)`,
        });
        assert.deepEqual(r.w.cluster.callsOf("deletePowerOffPod"), [{ op: "deletePowerOffPod", target: "worker-1" }]);
        // Not gone yet: the shutdown stays asked until the apiserver says so.
        assert.deepEqual(r.job.facts, { shutdownRequested: T0, podReplacing: T0 + 10_000 });
      });
    }

    it("withdraws the shutdown request once the pod being replaced is gone", async () => {
      const r = rig({ job: { podAttempts: 2 }, facts: { shutdownRequested: T0, podReplacing: T0 + 5000 }, before: (w) => { w.registerTainted("worker-1"); } });
      assert.deepEqual(await run(r, "await-not-ready", T0 + 10_000), {
        kind: "retry",
        error: "the power-off pod is going; replacing it (attempt 3 of 3)",
      });
      assert.deepEqual(r.job.facts, {});
    });

    it("keeps the power once the last attempt failed too (the default)", async () => {
      const r = rig({ job: { podAttempts: 3 }, facts: { shutdownRequested: T0 }, before: pod("Failed", false) });
      assert.deepEqual(await run(r, "await-not-ready", T0 + 10_000), {
        kind: "abort",
        reason: "keeping power: the power-off pod failed after 3 attempts (onShutdownTimeout is keep-power)",
      });
      assert.deepEqual(r.w.cluster.callsOf("deletePowerOffPod"), []);
      assert.deepEqual(r.w.reporter.of("hard-cut"), []);
    });

    it("cuts anyway once the last attempt failed when configured to, naming the Node", async () => {
      const r = rig({ world: { powerOff: { onShutdownTimeout: "cut" } }, job: { podAttempts: 3 }, facts: { shutdownRequested: T0 }, before: pod("Pending", true) });
      assert.deepEqual(await run(r, "await-not-ready", T0 + 10_000), { kind: "done", detail: "the power-off pod is terminating after 3 attempts; hard cut" });
      assert.deepEqual(r.w.reporter.of("hard-cut"), [
        { type: "hard-cut", machine: "worker-1", node: "worker-1", detail: "the power-off pod is terminating after 3 attempts; cutting anyway (onShutdownTimeout is cut)" },
      ]);
      assert.deepEqual(r.job.facts, { shutdownRequested: T0, notReady: T0 + 300_000, hardCut: T0 + 300_000 });
    });

    it("cuts anyway, with no Node to name, when the last pod went and its Node vanished", async () => {
      const r = rig({ world: { powerOff: { onShutdownTimeout: "cut" } }, job: { podAttempts: 3 }, facts: { podReplacing: T0 + 5000 } });
      assert.deepEqual(await run(r, "await-not-ready", T0 + 10_000), { kind: "done", detail: "the power-off pod failed after 3 attempts; hard cut" });
      assert.deepEqual(r.w.reporter.of("hard-cut"), [
        { type: "hard-cut", machine: "worker-1", node: "", detail: "the power-off pod failed after 3 attempts; cutting anyway (onShutdownTimeout is cut)" },
      ]);
    });

    it("replaces no pod at the deadline: the shutdown has failed", async () => {
      const r = rig({ job: { podAttempts: 1 }, facts: { shutdownRequested: T0 }, before: pod("Failed", false) });
      assert.deepEqual(await run(r, "await-not-ready", T0 + 300_000), {
        kind: "abort",
        reason: "keeping power: the node did not go NotReady within 300000 ms (onShutdownTimeout is keep-power)",
      });
      assert.deepEqual(r.w.cluster.callsOf("deletePowerOffPod"), []);
    });
  });

  it("cuts anyway at the deadline when configured to, naming the Node, or none when it vanished", async () => {
    const named = rig({ world: { powerOff: { onShutdownTimeout: "cut" } }, before: (w) => { w.registerTainted("worker-1"); } });
    assert.deepEqual(await run(named, "await-not-ready", T0 + 300_001), { kind: "done", detail: "the node did not go NotReady within 300000 ms; hard cut" });
    assert.deepEqual(named.w.reporter.of("hard-cut"), [
      { type: "hard-cut", machine: "worker-1", node: "worker-1", detail: "the node did not go NotReady within 300000 ms; cutting anyway (onShutdownTimeout is cut)" },
    ]);
    assert.deepEqual(named.job.facts, { notReady: T0 + 300_000, hardCut: T0 + 300_000 });
    const vanished = rig({ world: { powerOff: { onShutdownTimeout: "cut" } } });
    await run(vanished, "await-not-ready", T0 + 300_000);
    assert.deepEqual(vanished.w.reporter.of("hard-cut").map((e) => e.node), [""]);
  });
});

describe("power-off step grace", () => {
  it("is done once the grace ended, saying how", async () => {
    const standby = rig({ facts: { notReady: T0, standbyReached: T0 + 10_000 } });
    assert.deepEqual(await run(standby, "grace", T0 + 11_000), { kind: "done", detail: "grace ended (standby)" });
    const elapsed = rig({ facts: { notReady: T0, graceElapsed: T0 + 120_000 } });
    assert.deepEqual(await run(elapsed, "grace", T0 + 200_000), { kind: "done", detail: "grace ended (elapsed)" });
    assert.deepEqual(elapsed.job.facts, { notReady: T0, graceElapsed: T0 + 120_000 });
  });

  it("waits no grace once the power may be cut", async () => {
    const r = rig({ facts: { notReady: T0, cutUnconfirmed: T0 } });
    assert.deepEqual(await run(r, "grace", T0 + 1000), { kind: "done", detail: "plug already off" });
    assert.deepEqual(r.job.facts, { notReady: T0, cutUnconfirmed: T0 });
  });

  it("counts the grace from the NotReady time, and from now when the clock stepped back before it", async () => {
    const counted = rig({ facts: { notReady: T0 - 20_000 } });
    assert.deepEqual(await run(counted, "grace"), { kind: "wait", afterMs: 100_000, why: "grace" });
    assert.equal(counted.job.facts.notReady, T0 - 20_000);
    const stepped = rig({ facts: { notReady: T0 + 50_000 } });
    assert.deepEqual(await run(stepped, "grace"), { kind: "wait", afterMs: 120_000, why: "grace" });
    assert.equal(stepped.job.facts.notReady, T0);
    const elapsed = rig({ facts: { notReady: T0 - 120_000 } });
    assert.deepEqual(await run(elapsed, "grace"), { kind: "done", detail: "grace elapsed" });
    assert.equal(elapsed.job.facts.graceElapsed, T0);
  });

  describe("with a power sensor", () => {
    it("ends when the plug reads off", async () => {
      const r = rig({ world: SENSOR, facts: { notReady: T0 } });
      assert.deepEqual(await run(r, "grace", T0 + 1000), { kind: "done", detail: "plug reads off" });
      assert.deepEqual(r.job.facts, { notReady: T0 });
    });

    it("waits on, the draw unknown, when the plug cannot be read", async () => {
      const r = rig({ world: { ...SENSOR, on: ["worker-1"] }, facts: { notReady: T0, standby: T0 }, before: (w) => { w.power.setFault(plugOf(w), "unreachable"); } });
      assert.deepEqual(await run(r, "grace", T0 + 1000), { kind: "wait", afterMs: 2000, why: "grace, drawing ? W" });
      assert.deepEqual(r.job.facts, { notReady: T0 });
    });

    it("takes no draw from a plug that answers as another device", async () => {
      const r = rig({ world: { ...SENSOR, on: ["worker-1"] }, facts: { notReady: T0 }, before: swappedDevice });
      assert.deepEqual(await run(r, "grace", T0 + 1000), { kind: "wait", afterMs: 2000, why: "grace, drawing ? W" });
      assert.equal(r.w.reporter.of("device-mismatch").length, 1);
    });

    it("takes a draw at the standby limit for standby, and waits out the window", async () => {
      const r = rig({ world: { ...SENSOR, on: ["worker-1"] }, facts: { notReady: T0 }, before: (w) => { w.power.setWatts(plugOf(w), 5); } });
      assert.deepEqual(await run(r, "grace", T0 + 1000), { kind: "wait", afterMs: 2000, why: "grace, standby draw (5 W)" });
      assert.equal(r.job.facts.standby, T0 + 1000);
      assert.deepEqual(await run(r, "grace", T0 + 10_000), { kind: "wait", afterMs: 1000, why: "grace, standby draw (5 W)" });
      assert.deepEqual(await run(r, "grace", T0 + 11_000), { kind: "done", detail: "draw at standby (5 W)" });
      assert.deepEqual(r.job.facts, { notReady: T0, standby: T0 + 1000, standbyReached: T0 + 11_000 });
    });

    it("waits on while the draw is above standby", async () => {
      const r = rig({ world: { ...SENSOR, on: ["worker-1"] }, facts: { notReady: T0 }, before: (w) => { w.power.setWatts(plugOf(w), 5.5); } });
      assert.deepEqual(await run(r, "grace", T0 + 119_000), { kind: "wait", afterMs: 1000, why: "grace, drawing 5.5 W" });
    });
  });
});

describe("power-off step plug-off", () => {
  it("is done once the plug is known off, sending nothing", async () => {
    const r = rig({ facts: { plugOff: T0 } });
    assert.deepEqual(await run(r, "plug-off"), { kind: "done", detail: "plug off" });
    assert.deepEqual(r.w.power.calls, []);
  });

  describe("after a switch-off that was not confirmed", () => {
    const cut = { notReady: T0 - 130_000, graceElapsed: T0 - 10_000, cutUnconfirmed: T0 - 1000 };
    const drained = (w: World): void => { w.registerTainted("worker-1"); w.cluster.setReady("worker-1", false, T0 - 130_000); };

    it("takes a plug that reads off for off, sending nothing", async () => {
      const r = rig({ facts: cut, before: drained });
      assert.deepEqual(await run(r, "plug-off"), { kind: "done", detail: "plug reads off" });
      assert.deepEqual(r.job.facts, { ...cut, plugOff: T0 });
      assert.deepEqual(r.w.power.callsOf("turnOff"), []);
    });

    it("switches a plug that reads on off again, remembering it read on", async () => {
      const r = rig({ world: { on: ["worker-1"] }, facts: cut, before: drained });
      assert.deepEqual(await run(r, "plug-off"), { kind: "done", detail: "plug off" });
      assert.deepEqual(r.job.facts, { notReady: T0 - 130_000, graceElapsed: T0 - 10_000, onAfterUnconfirmedCut: T0, plugOff: T0 });
      assert.equal(r.w.power.isOn(plugOf(r.w)), false);
    });

    it("stops when the plug's address answers as another device", async () => {
      const r = rig({ facts: cut, before: (w) => { drained(w); swappedDevice(w); } });
      assert.deepEqual(await run(r, "plug-off"), {
        kind: "abort",
        reason: "keeping power: read of plug of worker-1: the device answered as device other; nothing sent",
        rule: "device-mismatch",
      });
      assert.deepEqual(r.job.facts, cut);
    });

    it("retries (throws) when the plug cannot be read", async () => {
      const r = rig({ facts: cut, before: (w) => { drained(w); w.power.setFault(plugOf(w), "unreachable"); } });
      await rejectsWith(run(r, "plug-off"), "plug-unreachable", /^read of plug of worker-1: timed out$/);
      assert.deepEqual(r.job.facts, cut);
    });

    it("retries while a switch answer makes the reading stale: the plug's state is still unknown", async () => {
      const r = rig({ facts: cut, before: drained });
      r.w.power.onCall = (c) => {
        // A switch answer arrives while the read is out.
        if (c.op === "read") switchAnswered(r.ctx, r.w.machine("worker-1"), { on: true });
      };
      assert.deepEqual(await run(r, "plug-off"), { kind: "retry", error: "the plug's state is still unknown" });
      assert.deepEqual(r.job.facts, cut);
      assert.deepEqual(r.w.power.callsOf("turnOff"), []);
    });
  });

  it("names a hard cut", async () => {
    const r = rig({
      world: { on: ["worker-1"] },
      facts: { notReady: T0 - 120_000, hardCut: T0 - 120_000, graceElapsed: T0 },
      before: (w) => { w.registerTainted("worker-1"); },
    });
    assert.deepEqual(await run(r, "plug-off"), { kind: "done", detail: "plug off (hard cut)" });
    assert.deepEqual(r.w.reporter.of("plug-off"), [{ type: "plug-off", machine: "worker-1", reason: "power-off", graceEnded: "elapsed" }]);
  });

  it("retries a switch-off whose answer was lost, taking the power for maybe cut", async () => {
    const r = rig({
      world: { on: ["worker-1"] },
      facts: { notReady: T0 - 120_000, graceElapsed: T0 },
      before: (w) => { w.registerTainted("worker-1"); w.cluster.setReady("worker-1", false, T0 - 120_000); w.power.loseNextAnswer("turnOff"); },
    });
    assert.deepEqual(await run(r, "plug-off"), {
      kind: "retry",
      error: "the switch-off was not confirmed, the plug may be off: turnOff of plug of worker-1: sent, but its answer was lost",
    });
    assert.deepEqual(r.job.facts, { notReady: T0 - 120_000, graceElapsed: T0, cutUnconfirmed: T0 });
  });
});

describe("power-off step remove-pod", () => {
  it("asks nothing once the pod is known gone", async () => {
    const r = rig({ facts: { podRemoved: T0 - 1000 } });
    assert.deepEqual(await run(r, "remove-pod"), { kind: "done", detail: "power-off pod gone" });
    assert.deepEqual(r.w.cluster.callsOf("deletePowerOffPod"), []);
    assert.equal(r.job.facts.podRemoved, T0 - 1000);
  });

  it("deletes the pod and waits until the apiserver says it is gone", async () => {
    const r = rig({
      facts: { notReady: T0 - 60_000, plugOff: T0 - 1000 },
      before: (w) => { w.cluster.addPod({ machine: "worker-1", nodeName: "worker-1", startedAt: T0, phase: "Succeeded", terminating: false }); },
    });
    assert.deepEqual(await run(r, "remove-pod"), { kind: "wait", afterMs: 1000, why: "waiting for the power-off pod to go" });
    assert.equal(r.job.facts.podRemoved, undefined);
    r.w.cluster.finishPodDeletion();
    assert.deepEqual(await run(r, "remove-pod", T0 + 1000), { kind: "done", detail: "power-off pod gone" });
    assert.equal(r.job.facts.podRemoved, T0 + 1000);
  });
});

describe("power-off step delete-node", () => {
  const STRANDED_AGAIN = "its plug reads on again after the cut: if the power-off pod shut it down anew, switch it off and on by hand";
  /** worker-1's drained Node, NotReady, the one whose shutdown the job asked for; the plug as `on` says. */
  function cut(on: boolean, more: Partial<RigOptions> = {}): Rig {
    const r = rig({
      world: { on: on ? ["worker-1"] : [] },
      facts: { plugOff: T0 - 1000, podRemoved: T0 },
      ...more,
      before: (w) => {
        w.registerTainted("worker-1");
        w.cluster.setReady("worker-1", false, T0 - 60_000);
        more.before?.(w);
      },
    });
    if (r.job.shutdownNodeUid === undefined) rememberShutdownNode(r.job, r.w.cluster.nodeNamed("worker-1")?.uid);
    return r;
  }

  it("deletes the drained Node, reporting it once, and is done when the view shows it gone", async () => {
    const r = cut(false);
    assert.deepEqual(await run(r, "delete-node"), { kind: "wait", afterMs: 1000, why: "waiting for the Node to go" });
    assert.equal(r.w.cluster.nodeNamed("worker-1"), undefined);
    assert.deepEqual(r.w.reporter.of("node-deleted"), [{ type: "node-deleted", machine: "worker-1", node: "worker-1" }]);
    assert.deepEqual(r.stored, ["worker-1"]);
    assert.deepEqual(r.w.reporter.of("stranded"), []);
    assert.deepEqual(await run(r, "delete-node", T0 + 1000), { kind: "done", detail: "node deleted" });
    assert.deepEqual(r.stored, ["worker-1"], "no Node left: no records to wait for");
    assert.equal(r.w.reporter.of("node-deleted").length, 1);
  });

  it("deletes again, untold, a Node it asked to delete before", async () => {
    const r = cut(true);
    nodeDeleted(r.job, "worker-1");
    await run(r, "delete-node");
    assert.deepEqual(r.w.cluster.callsOf("deleteNode"), [{ op: "deleteNode", target: "worker-1" }]);
    assert.deepEqual(r.w.reporter.of("node-deleted"), []);
    assert.deepEqual(r.w.reporter.of("stranded"), [], "its plug reading on is no news: the Node was deleted before");
  });

  it("waits while the view still shows a Node the apiserver no longer has", async () => {
    const r = rig({ world: { lagging: true }, facts: { plugOff: T0 }, before: (w) => { w.registerTainted("worker-1"); w.view?.sync(); w.cluster.removeNode("worker-1"); } });
    assert.deepEqual(await run(r, "delete-node"), { kind: "wait", afterMs: 1000, why: "waiting for the Node to go" });
    r.w.view?.sync();
    assert.deepEqual(await run(r, "delete-node"), { kind: "done", detail: "no node" });
    assert.deepEqual(r.w.cluster.callsOf("deleteNode"), []);
  });

  it("is done at once with no Node, reading no plug", async () => {
    const r = rig({ world: { on: ["worker-1"] }, facts: { plugOff: T0 } });
    assert.deepEqual(await run(r, "delete-node"), { kind: "done", detail: "no node" });
    assert.deepEqual(r.w.power.calls, []);
    assert.deepEqual(r.w.reporter.of("stranded"), []);
    assert.deepEqual(r.stored, []);
  });

  it("leaves a Node Ready without the taint alone", async () => {
    const r = rig({ facts: { plugOff: T0 }, before: (w) => { w.register("worker-1"); } });
    assert.deepEqual(await run(r, "delete-node"), { kind: "done", detail: "node worker-1 is Ready without the taint after the cut; left alone" });
    assert.deepEqual(r.w.cluster.callsOf("deleteNode"), []);
    assert.deepEqual(r.w.reporter.of("stranded"), []);
  });

  it("leaves a Node registered anew after the cut alone, and reports it stranded", async () => {
    const r = cut(false, { job: { shutdownNodeUid: "uid-of-the-node-shut-down" } });
    r.w.cluster.untaint("worker-1");
    assert.deepEqual(await run(r, "delete-node"), { kind: "done", detail: "node worker-1 registered anew after the cut; left alone" });
    assert.deepEqual(r.w.reporter.of("stranded"), [
      {
        type: "stranded",
        machine: "worker-1",
        node: "worker-1",
        detail: "node worker-1 registered anew after the cut and is NotReady: if the power-off pod shut it down too, switch its machine off and on by hand",
      },
    ]);
    assert.deepEqual(r.w.cluster.callsOf("deleteNode"), []);
    assert.deepEqual(r.stored, []);
  });

  for (const [what, uid, untaint] of [
    ["a tainted Node of another uid", "uid-of-the-node-shut-down", false],
    ["a Node without the taint when the job knows no Node it shut down", undefined, true],
    ["the very Node shut down, its taint gone", "same", true],
  ] as const) {
    it(`deletes ${what}`, async () => {
      const r = cut(false, uid === "same" || uid === undefined ? {} : { job: { shutdownNodeUid: uid } });
      if (uid === undefined) rememberShutdownNode(r.job, undefined);
      if (untaint) r.w.cluster.untaint("worker-1");
      assert.deepEqual(await run(r, "delete-node"), { kind: "wait", afterMs: 1000, why: "waiting for the Node to go" });
      assert.equal(r.w.cluster.nodeNamed("worker-1"), undefined);
      assert.deepEqual(r.w.reporter.of("node-deleted"), [{ type: "node-deleted", machine: "worker-1", node: "worker-1" }]);
      assert.deepEqual(r.w.reporter.of("stranded"), []);
    });
  }

  it("reports the machine stranded when its plug reads on again after the cut, and deletes its Node all the same", async () => {
    const r = cut(true);
    assert.deepEqual(await run(r, "delete-node"), { kind: "wait", afterMs: 1000, why: "waiting for the Node to go" });
    assert.deepEqual(r.w.reporter.of("stranded"), [{ type: "stranded", machine: "worker-1", node: "worker-1", detail: STRANDED_AGAIN }]);
    assert.equal(r.w.cluster.nodeNamed("worker-1"), undefined);
    assert.deepEqual(r.stored, ["worker-1"]);
  });

  it("names the Node found, not the job's, in that report", async () => {
    const r = cut(true, { job: { node: "" } });
    await run(r, "delete-node");
    assert.deepEqual(r.w.reporter.of("stranded").map((e) => e.node), ["worker-1"]);
  });

  for (const [what, setup] of [
    ["reads off", (): void => undefined],
    ["cannot be read", (w: World): void => { w.power.setFault(plugOf(w), "unreachable"); }],
  ] as const) {
    it(`reports nothing stranded when the plug ${what}, and deletes the Node`, async () => {
      const r = cut(false, { before: setup });
      assert.deepEqual(await run(r, "delete-node"), { kind: "wait", afterMs: 1000, why: "waiting for the Node to go" });
      assert.deepEqual(r.w.reporter.of("stranded"), []);
      assert.equal(r.w.cluster.nodeNamed("worker-1"), undefined);
    });
  }

  it("does not take the relay of another device for the machine's plug reading on", async () => {
    const r = cut(true, { before: swappedDevice });
    await run(r, "delete-node");
    assert.deepEqual(r.w.reporter.of("stranded"), []);
    assert.equal(r.w.reporter.of("device-mismatch").length, 1);
    assert.equal(r.w.cluster.nodeNamed("worker-1"), undefined);
  });
});

describe("the power-off saga through the runner", () => {
  it("resumes the power-off pod an earlier run left, creating none, and reports each step's detail", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    w.register("worker-2");
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    // Its pod is already there (an earlier run created it, and the view shows it) when the runner first looks.
    const t0 = w.clock.now();
    w.cluster.addPod({ machine: "worker-1", nodeName: "worker-1", startedAt: t0, phase: "Running", terminating: false });
    assert.equal(await w.pool.reconcile(), 5000);
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    w.cluster.setReady("worker-1", false, t0 + 3000);
    w.clock.advance(5000);
    await w.drive(200);
    assert.deepEqual(
      w.reporter.of("power-off-step").map((e) => `${e.step} ${e.outcome}: ${e.detail}`),
      [
        "check-taint done: node carries the ToBeDeleted taint",
        "power-off-pod done: power-off pod exists",
        "await-not-ready waiting: waiting for the node to go NotReady",
        "await-not-ready done: node NotReady",
        "grace waiting: grace",
        "grace done: grace elapsed",
        "plug-off done: plug off",
        "remove-pod waiting: waiting for the power-off pod to go",
        "remove-pod done: power-off pod gone",
        "delete-node waiting: waiting for the Node to go",
        "delete-node done: node deleted",
      ],
    );
    assert.equal(w.cluster.nodeNamed("worker-1"), undefined);
    assert.equal(w.power.isOn(w.machine("worker-1").power), false);
  });
});
