// The watch of an aborted power-off's machine on its own (revival.ts `revive`): a domain context over the world's
// fakes, worker-1's power-off job as the abort left it (its OS shutdown asked, its traces gone, the watch begun),
// and one pass of the watch at a time: the wait it answers, the events it reports, and the commands that reach
// the plug. The whole sequence through the runner is in safety-reproductions-3.test.ts (3b-3).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { PoolDeps } from "../../src/domain/index.ts";
import { HOLD_ANNOTATION } from "../../src/domain/index.ts";
import { revive } from "../../src/domain/revival.ts";
import { readPlug } from "../../src/domain/switching.ts";
import { createContext, type PoolContext } from "../../src/domain/context.ts";
import { beginPowerOff, deviceMismatched } from "../../src/domain/lifecycle.ts";
import { newJob, type PowerOffFacts, type PowerOffJob, type PowerOffRun } from "../../src/domain/power-off-job.ts";
import { PREFIX, World, type WorldOptions } from "../harness/fakes/world.ts";
import { LaggingView } from "../harness/fakes/lagging-view.ts";

/** The fake clock's time at the start. */
const T0 = 1_800_000_000_000;
/** plugpool asked for worker-1's OS shutdown. */
const ASKED = T0 - 200_000;
/** The watch began, 10 s before the fake clock's start (monotonic ms): the aborted power-off's traces were gone. */
const SINCE = -10_000;
/** worker-1's Node went NotReady: the grace (120 s) has passed by 30 s at T0. */
const DOWN = T0 - 150_000;
/** A NotReady that came 20 s before T0: 100 s of grace are left. */
const RECENTLY_DOWN = T0 - 20_000;

const POLL = 5000;
const HELD = "it is held; remove the hold (or pin the identity of its device) to have it power-cycled, or switch it on by hand";

interface Rig {
  readonly w: World;
  readonly ctx: PoolContext;
  readonly job: PowerOffJob;
  /** The view the watch sees the cluster through, with `lagging`: it shows the cluster as at `sync()`. */
  readonly view: LaggingView | undefined;
}

interface RigOptions {
  readonly world?: WorldOptions;
  /** When worker-1's Node went NotReady (default DOWN); null: no Node at all. */
  readonly down?: number | null;
  /** The job's facts (default: the shutdown asked at ASKED). */
  readonly facts?: PowerOffFacts;
  readonly job?: Partial<PowerOffRun>;
  /** The job's Node is the one registered (default), or another uid. */
  readonly uid?: "registered" | "other" | "none";
  /** The watch sees the cluster through a view that lags, from after `before`, until `view.sync()` (default: the truth). */
  readonly lagging?: boolean;
  readonly before?: (w: World) => void;
}

/** worker-1 powered, its Node NotReady since `down`, and its aborted power-off's job watching it since SINCE. */
function rig(options: RigOptions = {}): Rig {
  const w = new World({ on: ["worker-1", "worker-2"], ...options.world });
  const down = options.down === undefined ? DOWN : options.down;
  const node =
    down === null ? undefined : w.cluster.addNode({ name: "worker-1", providerID: PREFIX + "worker-1", ready: false, ...(Number.isFinite(down) && { readyChangedAt: down }) });
  w.register("worker-2");
  // The device was met before: switch commands go without learning it first.
  w.records.seedDeviceIdentity("worker-1", w.power.identityOf(plugOf(w)));
  options.before?.(w);
  const view = options.lagging === true ? new LaggingView(w.cluster) : undefined;
  const deps: PoolDeps = { clock: w.clock, power: w.power, cluster: view ?? w.cluster, lookup: w.cluster, teardown: w.cluster, records: w.records, reporter: w.reporter };
  const ctx = createContext(deps, w.config);
  const uid = options.uid ?? "registered";
  const job: PowerOffJob = {
    ...newJob("worker-1", ASKED - 5000),
    aborting: { step: "await-not-ready", reason: "called off" },
    podAttempts: 1,
    facts: options.facts ?? { recordCommitted: ASKED - 5000, shutdownRequested: ASKED },
    shutdownNodeUid: uid === "none" ? undefined : uid === "other" ? "uid-of-an-older-worker-1" : node?.uid,
    revival: { since: SINCE, onLeft: undefined, toldAt: undefined },
    ...options.job,
  };
  beginPowerOff(ctx, w.machine("worker-1"), job);
  return { w, ctx, job, view };
}

const plugOf = (w: World): ReturnType<World["machine"]>["power"] => w.machine("worker-1").power;

/** One pass of the watch. */
function pass(r: Rig): Promise<number | undefined> {
  return revive(r.ctx, r.w.machine("worker-1"), r.job);
}

/** The calls that reached worker-1's plug (read, turnOff, turnOn), in order. */
function calls(r: Rig): string[] {
  return r.w.power.calls.filter((c) => c.control.key === "plug-worker-1").map((c) => c.op);
}

const SENSOR: WorldOptions = { groups: [{ id: "workers", machines: ["worker-1", "worker-2"], sensors: ["worker-1"] }] };
const BMC: WorldOptions = { groups: [{ id: "workers", machines: ["worker-1", "worker-2"], shutsDown: ["worker-1"] }] };

const CYCLED = [
  { type: "plug-off", machine: "worker-1", reason: "cycle" },
  { type: "revived", machine: "worker-1", node: "worker-1", how: "power-cycle" },
];

describe("revival: a halted machine is brought back", () => {
  it("power-cycles the plug of a machine halted past its grace, off then on at once, and ends the watch", async () => {
    const r = rig();
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOff", "turnOn"]);
    assert.deepEqual(r.w.reporter.events, CYCLED, "the switch-on is told as the revival, not as a power-restored");
    assert.ok(r.w.power.isOn(plugOf(r.w)));
    assert.deepEqual(r.job.revival?.onLeft, { at: T0, how: "power-cycle" }, "the off went through at T0");
  });

  it("switches on a BMC that switched itself off when the OS halted, never off", async () => {
    const r = rig({ world: BMC, before: (w) => { w.power.set(plugOf(w), false); } });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOn"]);
    assert.deepEqual(r.w.reporter.events, [{ type: "revived", machine: "worker-1", node: "worker-1", how: "power-on" }]);
  });

  it("switches on a plug that reads off (switched off by hand), never off", async () => {
    const r = rig({ before: (w) => { w.power.set(plugOf(w), false); } });
    await readPlug(r.ctx, r.w.machine("worker-1"));
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["read", "turnOn"]);
    assert.deepEqual(r.w.reporter.events, [{ type: "revived", machine: "worker-1", node: "worker-1", how: "power-on" }]);
  });

  it("waits for the inrush limit to spare a plug-on before the cycle's off, and then cycles", async () => {
    const r = rig({ world: { scaleUp: { maxPowerOnsPerInterval: 1, powerOnIntervalMs: 10_000 } } });
    assert.equal(await pass(r), 10_000, "a new pool waits one interval before its first plug-on");
    assert.deepEqual(calls(r), []);
    r.w.clock.advance(9_999);
    assert.equal(await pass(r), 1);
    r.w.clock.advance(1);
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOff", "turnOn"]);
  });

  it("counts the NotReady from a moment up to the condition's resolution (1 s) before the shutdown was asked", async () => {
    for (const down of [ASKED - 1000, ASKED, ASKED + 1]) {
      const r = rig({ down });
      const when = `NotReady ${down - ASKED} ms after the request`;
      assert.equal(await pass(r), undefined, when);
      assert.deepEqual(r.w.reporter.events, CYCLED, when);
    }
  });
});

describe("revival: until the machine counts as down", () => {
  it("without a power sensor, looks again within 5 s until the grace since NotReady has passed, reading nothing", async () => {
    const r = rig({ down: RECENTLY_DOWN });
    assert.equal(await pass(r), POLL);
    r.w.clock.advance(96_999);
    assert.equal(await pass(r), 3001, "the grace's end, when it is nearer than the poll");
    r.w.clock.advance(3000);
    assert.equal(await pass(r), 1);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, []);
    r.w.clock.advance(1);
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOff", "turnOn"]);
  });

  it("with a power sensor, waits while the draw is above standby", async () => {
    const r = rig({ world: SENSOR, down: RECENTLY_DOWN });
    assert.equal(await pass(r), POLL);
    assert.deepEqual(calls(r), ["read"]);
    assert.deepEqual(r.w.reporter.events, []);
  });

  it("with a power sensor, cycles at once when the draw is at standby (5 W), before the grace ran out", async () => {
    const r = rig({ world: SENSOR, down: RECENTLY_DOWN, before: (w) => { w.power.setWatts(plugOf(w), 5); } });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["read", "turnOff", "turnOn"]);
    assert.deepEqual(r.w.reporter.events, [{ type: "plug-off", machine: "worker-1", reason: "cycle", watts: 5 }, CYCLED[1]]);
  });

  it("with a power sensor, switches on at once a plug the read finds off", async () => {
    const r = rig({ world: SENSOR, down: RECENTLY_DOWN, before: (w) => { w.power.set(plugOf(w), false); } });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["read", "turnOn"]);
    assert.deepEqual(r.w.reporter.events, [{ type: "revived", machine: "worker-1", node: "worker-1", how: "power-on" }]);
  });

  it("with a power sensor that tells no draw (a faulty reading), waits for the grace", async () => {
    const r = rig({ world: SENSOR, down: RECENTLY_DOWN, before: (w) => { w.power.setWatts(plugOf(w), -50); } });
    assert.equal(await pass(r), POLL);
    assert.deepEqual(calls(r), ["read"]);
  });

  it("with a power sensor whose read fails, waits for the grace", async () => {
    const r = rig({ world: SENSOR, down: RECENTLY_DOWN, before: (w) => { w.power.failNext("read"); } });
    assert.equal(await pass(r), POLL);
    assert.deepEqual(calls(r), ["read"]);
    assert.deepEqual(r.w.reporter.events, []);
  });

  it("with a power sensor, takes no standby draw from a device that answers as another", async () => {
    const r = rig({
      world: SENSOR,
      down: RECENTLY_DOWN,
      before: (w) => {
        w.power.replaceDevice(plugOf(w), "device other");
        w.power.setWatts(plugOf(w), 1);
      },
    });
    assert.equal(await pass(r), POLL);
    assert.deepEqual(calls(r), ["read"]);
    assert.deepEqual(r.w.reporter.events, [{ type: "device-mismatch", machine: "worker-1", expected: "device plug-worker-1", seen: "device other" }]);
  });

  it("with a power sensor, reads nothing once the grace has passed", async () => {
    const r = rig({ world: SENSOR });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOff", "turnOn"]);
  });

  it("with a power sensor, reads nothing when the grace ends just now", async () => {
    const r = rig({ world: SENSOR, down: T0 - 120_000 });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOff", "turnOn"]);
  });
});

describe("revival: the request's time and the Node's on clocks set apart", () => {
  // plugpool's wall clock ten minutes ahead of the control plane's: its request reads as later than the NotReady
  // that followed it.
  const AHEAD = DOWN + 600_000;

  it("brings back a machine whose Node was Ready when asked and went NotReady after, though plugpool's clock is ahead", async () => {
    const r = rig({ job: { facts: { recordCommitted: AHEAD - 5000, shutdownRequested: AHEAD }, shutdownNodeReady: { ready: true, changedAt: T0 - 3_600_000 } } });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOff", "turnOn"]);
    assert.deepEqual(r.w.reporter.events, CYCLED);
  });

  it("never cycles a machine whose Node was NotReady when asked and NotReady since another moment: it was Ready between, unseen", async () => {
    const r = rig({ job: { facts: { recordCommitted: DOWN - 605_000, shutdownRequested: DOWN - 600_000 }, shutdownNodeReady: { ready: false, changedAt: DOWN - 60_000 } } });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, [{ type: "stranded", machine: "worker-1", node: "worker-1", detail: "node worker-1 was NotReady before plugpool asked for the shutdown" }]);
  });

  it("never cycles a machine whose Node's NotReady bears the time its Ready bore when asked: no change it can tell", async () => {
    const r = rig({ job: { facts: { recordCommitted: AHEAD - 5000, shutdownRequested: AHEAD }, shutdownNodeReady: { ready: true, changedAt: DOWN } } });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.equal(r.w.reporter.of("stranded").length, 1);
  });

  it("never cycles a machine whose Node was NotReady already when asked, though plugpool's clock is behind", async () => {
    const r = rig({ job: { facts: { recordCommitted: DOWN - 605_000, shutdownRequested: DOWN - 600_000 }, shutdownNodeReady: { ready: false, changedAt: DOWN } } });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, [{ type: "stranded", machine: "worker-1", node: "worker-1", detail: "node worker-1 was NotReady before plugpool asked for the shutdown" }]);
  });
});

describe("revival: a machine that may run, or cannot be judged", () => {
  it("watches a machine whose Node is Ready for as long as a shutdown is waited for (notReadyTimeout since the watch began)", async () => {
    const r = rig({ before: (w) => { w.cluster.setReady("worker-1", true, T0 - 1000); } });
    assert.equal(await pass(r), POLL);
    r.w.clock.advance(SINCE + 300_000 - 1);
    assert.equal(await pass(r), POLL);
    r.w.clock.advance(1);
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, []);
  });

  it("keeps watching through a wall clock stepped forward: its window is time that passes", async () => {
    const r = rig({ world: BMC, before: (w) => { w.cluster.setReady("worker-1", true, T0 - 1000); } });
    r.w.clock.step(3_600_000);
    assert.equal(await pass(r), POLL, "an hour on the wall clock, 10 s of time");
    // The OS acts on the BMC's shutdown a minute later, well within the shutdown timeout.
    r.w.clock.advance(60_000);
    r.w.cluster.setReady("worker-1", false, r.w.clock.now());
    r.w.power.set(plugOf(r.w), false);
    r.w.clock.advance(120_000);
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOn"]);
    assert.deepEqual(r.w.reporter.events, [{ type: "revived", machine: "worker-1", node: "worker-1", how: "power-on" }]);
  });

  it("ends the watch on the apiserver's word: a Node the lagging view still shows Ready is read NotReady, watched on, and brought back", async () => {
    const r = rig({ world: BMC, lagging: true, before: (w) => { w.cluster.setReady("worker-1", true, T0 - 1000); } });
    r.w.clock.advance(SINCE + 300_000 - 30_000);
    // The OS halts (a BMC powers the machine off) within the window; the view does not show it yet.
    r.w.cluster.setReady("worker-1", false, r.w.clock.now());
    r.w.power.set(plugOf(r.w), false);
    r.w.clock.advance(30_000);
    assert.equal(await pass(r), POLL, "the view shows Ready at the window's end, the apiserver NotReady");
    assert.deepEqual(r.w.cluster.callsOf("nodesClaiming").length, 1);
    r.view?.sync();
    r.w.clock.advance(120_000);
    assert.equal(await pass(r), undefined, "brought back once the view shows the halt and its grace has passed");
    assert.deepEqual(calls(r), ["turnOn"]);
    assert.deepEqual(r.w.reporter.events, [{ type: "revived", machine: "worker-1", node: "worker-1", how: "power-on" }]);
  });

  it("watches on when the apiserver has no Node of the machine left, and reports it once the view shows the Node gone", async () => {
    const r = rig({ lagging: true, before: (w) => { w.cluster.setReady("worker-1", true, T0 - 1000); } });
    r.w.clock.advance(SINCE + 300_000);
    r.w.cluster.removeNode("worker-1");
    assert.equal(await pass(r), POLL, "no Node read is no sign the machine runs");
    r.view?.sync();
    assert.equal(await pass(r), undefined);
    assert.deepEqual(r.w.reporter.events, [{ type: "stranded", machine: "worker-1", node: "worker-1", detail: "its Node worker-1 is gone; no sign it halted" }]);
  });

  it("watches on when the apiserver shows one Node of the machine Ready and the one shut down NotReady", async () => {
    const r = rig({ lagging: true, before: (w) => { w.cluster.setReady("worker-1", true, T0 - 1000); } });
    r.w.clock.advance(SINCE + 300_000 - 30_000);
    r.w.cluster.setReady("worker-1", false, r.w.clock.now());
    r.w.cluster.addNode({ name: "worker-1-new", providerID: PREFIX + "worker-1" });
    r.w.clock.advance(30_000);
    assert.equal(await pass(r), POLL);
    assert.deepEqual(calls(r), []);
  });

  it("watches on while the apiserver cannot say whether the machine runs, and ends once it reads it Ready", async () => {
    const r = rig({ before: (w) => { w.cluster.setReady("worker-1", true, T0 - 1000); } });
    r.w.clock.advance(SINCE + 300_000);
    r.w.cluster.failNext("nodesClaiming");
    assert.equal(await pass(r), POLL);
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, []);
  });

  it("takes a Ready Node of another name that claims the machine for a running machine, the shut-down Node NotReady", async () => {
    const r = rig({ before: (w) => { w.cluster.addNode({ name: "worker-1-new", providerID: PREFIX + "worker-1" }); } });
    assert.equal(await pass(r), POLL);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, []);
  });

  it("reports a machine whose Node is gone, and ends the watch", async () => {
    const r = rig({ down: null });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, [{ type: "stranded", machine: "worker-1", node: "worker-1", detail: "its Node worker-1 is gone; no sign it halted" }]);
  });

  const NOT_THE_ONE = { type: "stranded", machine: "worker-1", node: "worker-1", detail: "node worker-1 is not the Node whose OS plugpool shut down" };

  it("reports a machine whose NotReady Node is another than the one shut down, and ends the watch", async () => {
    const r = rig({ uid: "other" });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, [NOT_THE_ONE]);
  });

  it("reports a machine whose shut-down Node was never known", async () => {
    const r = rig({ uid: "none" });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, [NOT_THE_ONE]);
  });

  it("reports a machine with a NotReady Node of another uid even while a Node of another name is Ready", async () => {
    const r = rig({ uid: "other", before: (w) => { w.cluster.addNode({ name: "worker-1-new", providerID: PREFIX + "worker-1" }); } });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, [NOT_THE_ONE]);
  });

  it("reports a machine whose Node was NotReady before the shutdown was asked (or since a moment unknown)", async () => {
    for (const down of [ASKED - 1001, Number.NEGATIVE_INFINITY]) {
      const r = rig({ down });
      assert.equal(await pass(r), undefined);
      assert.deepEqual(calls(r), []);
      assert.deepEqual(r.w.reporter.events, [
        { type: "stranded", machine: "worker-1", node: "worker-1", detail: "node worker-1 was NotReady before plugpool asked for the shutdown" },
      ]);
    }
  });
});

describe("revival: the watch does not apply", () => {
  it("does nothing for a job whose watch has not begun, whose OS shutdown was never asked, or whose plug is known off", async () => {
    for (const options of [{ job: { revival: undefined } }, { facts: { recordCommitted: ASKED } }, { facts: { shutdownRequested: ASKED, plugOff: T0 - 1000 } }]) {
      const r = rig(options);
      assert.equal(await pass(r), undefined);
      assert.deepEqual(calls(r), []);
      assert.deepEqual(r.w.reporter.events, []);
    }
  });

  it("reports, never cycles, a machine whose plug read on after a switch-off whose answer was lost", async () => {
    const r = rig({ facts: { shutdownRequested: ASKED, cutUnconfirmed: undefined, onAfterUnconfirmedCut: T0 - 1000 } });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, [
      {
        type: "stranded",
        machine: "worker-1",
        node: "worker-1",
        detail: "a switch-off whose answer was lost was followed by the plug reading on: if the machine is halted, switch it off and on by hand",
      },
    ]);
  });
});

describe("revival: a held machine", () => {
  const told = { type: "stranded", machine: "worker-1", node: "worker-1", detail: HELD };

  it("is not cycled but reported, again every 10 minutes, while held", async () => {
    const r = rig({ before: (w) => { w.cluster.annotate("worker-1", HOLD_ANNOTATION, "true"); } });
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.w.reporter.events, [told]);
    r.w.clock.advance(599_999);
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.w.reporter.events, [told], "not again within 10 minutes");
    r.w.clock.advance(1);
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.w.reporter.events, [told, told]);
    r.w.clock.advance(1);
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.w.reporter.events, [told, told]);
    assert.deepEqual(calls(r), []);
    // The hold goes: the machine is cycled.
    r.w.cluster.annotate("worker-1", HOLD_ANNOTATION, undefined);
    assert.equal(await pass(r), undefined);
    assert.deepEqual(r.w.reporter.events, [told, told, ...CYCLED]);
  });

  it("whose device answered as another is held, whatever its Node shows", async () => {
    const r = rig({ down: null });
    deviceMismatched(r.ctx, r.w.machine("worker-1"), { expected: "device plug-worker-1", seen: "device other" });
    assert.equal(await pass(r), POLL);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, [told]);
  });

  it("whose plug reads off is reported once, and the watch ends", async () => {
    const r = rig({ before: (w) => { w.cluster.annotate("worker-1", HOLD_ANNOTATION, "true"); w.power.set(plugOf(w), false); } });
    await readPlug(r.ctx, r.w.machine("worker-1"));
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["read"]);
    assert.deepEqual(r.w.reporter.events, [
      {
        type: "stranded",
        machine: "worker-1",
        node: "worker-1",
        detail: "it is held and its plug reads off; if the machine still has power, it was left halted: switch it on by hand",
      },
    ]);
  });
});

describe("revival: the cycle's off", () => {
  it("reports a switch-off that failed and tries again on the next pass", async () => {
    const r = rig({ before: (w) => { w.power.failNext("turnOff"); } });
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.w.reporter.events, [
      { type: "power-off-step", machine: "worker-1", step: "plug-off", outcome: "failed", detail: "power cycle: turnOff of (next): timed out" },
    ]);
    assert.ok(r.w.power.isOn(plugOf(r.w)));
    r.w.reporter.clear();
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOff", "turnOff", "turnOn"]);
    assert.deepEqual(r.w.reporter.events, CYCLED);
  });

  it("is refused at the plug while the cluster view is not current, and asked again on the next pass", async () => {
    const r = rig({ before: (w) => { w.cluster.viewCurrent = false; } });
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.w.reporter.events, [
      { type: "refused", machine: "worker-1", rule: "view-not-current", detail: "the cluster view is not known to be current" },
    ]);
    assert.ok(r.w.power.isOn(plugOf(r.w)));
  });

  it("is refused at the plug when a hold came meanwhile: the watch goes on (the hold is reported next pass)", async () => {
    const r = rig();
    r.w.power.onCall = (c) => {
      if (c.op === "turnOff") r.w.cluster.annotate("worker-1", HOLD_ANNOTATION, "true");
    };
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.w.reporter.events, [{ type: "refused", machine: "worker-1", rule: "held", detail: "node worker-1 carries the hold annotation" }]);
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.w.reporter.events.at(-1), { type: "stranded", machine: "worker-1", node: "worker-1", detail: HELD });
    assert.ok(r.w.power.isOn(plugOf(r.w)));
  });

  it("is refused at the plug when the Node turned Ready meanwhile: the machine runs, nothing stranded", async () => {
    const r = rig();
    r.w.power.onCall = (c) => {
      if (c.op === "turnOff") r.w.cluster.setReady("worker-1", true, T0);
    };
    assert.equal(await pass(r), undefined);
    assert.deepEqual(r.w.reporter.events, [{ type: "refused", machine: "worker-1", rule: "node-ready", detail: "node worker-1 is Ready; worker-1 runs" }]);
    assert.ok(r.w.power.isOn(plugOf(r.w)));
  });

  it("is refused at the plug when the Node vanished meanwhile: the machine is reported stranded", async () => {
    const r = rig();
    r.w.power.onCall = (c) => {
      if (c.op === "turnOff") r.w.cluster.removeNode("worker-1");
    };
    assert.equal(await pass(r), undefined);
    const detail = "the Node of worker-1 vanished; no sign it is halted";
    assert.deepEqual(r.w.reporter.events, [
      { type: "refused", machine: "worker-1", rule: "node-vanished", detail },
      { type: "stranded", machine: "worker-1", node: "worker-1", detail },
    ]);
    assert.ok(r.w.power.isOn(plugOf(r.w)));
  });
});

describe("revival: the switch-on after the off", () => {
  it("is tried again on the next passes when it fails, without a second off, whatever the Node shows by then", async () => {
    const r = rig();
    r.w.power.onCall = (c) => {
      // The switch-on is sent 3 s after the off went through, and fails.
      if (c.op === "turnOn") r.w.clock.advance(3000);
    };
    r.w.power.failNext("turnOn");
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.job.revival?.onLeft, { at: T0, how: "power-cycle" }, "only the switch-on is left since the off at T0");
    assert.equal(r.w.power.isOn(plugOf(r.w)), false);
    assert.deepEqual(r.w.reporter.events, [
      CYCLED[0],
      { type: "power-on-failed", machine: "worker-1", group: "workers", error: "turnOn of (next): timed out" },
    ]);
    r.w.power.onCall = undefined;
    r.w.reporter.clear();
    // The Node the off was judged on is replaced meanwhile: the machine has no power, it is switched on all the same.
    r.w.cluster.removeNode("worker-1");
    r.w.register("worker-1", { ready: false });
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOff", "turnOn", "turnOn"]);
    assert.deepEqual(r.w.reporter.events, [CYCLED[1]]);
    assert.ok(r.w.power.isOn(plugOf(r.w)));
  });

  it("is held back, and reported, when the machine was held since the off", async () => {
    const r = rig({ job: { revival: { since: SINCE, onLeft: { at: T0 - 1000, how: "power-cycle" }, toldAt: undefined } }, before: (w) => { w.power.set(plugOf(w), false); } });
    r.w.cluster.annotate("worker-1", HOLD_ANNOTATION, "true");
    assert.equal(await pass(r), POLL);
    assert.deepEqual(calls(r), []);
    assert.deepEqual(r.w.reporter.events, [{ type: "stranded", machine: "worker-1", node: "worker-1", detail: HELD }]);
    r.w.cluster.annotate("worker-1", HOLD_ANNOTATION, undefined);
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["turnOn"]);
    assert.ok(r.w.power.isOn(plugOf(r.w)));
  });

  it("of a machine whose plug read off, when it fails, is tried again without looking at the Node again", async () => {
    const r = rig({ before: (w) => { w.power.set(plugOf(w), false); } });
    await readPlug(r.ctx, r.w.machine("worker-1"));
    r.w.power.failNext("turnOn");
    assert.equal(await pass(r), POLL);
    assert.deepEqual(r.job.revival?.onLeft, { at: T0, how: "power-on" });
    r.w.cluster.removeNode("worker-1");
    assert.equal(await pass(r), undefined);
    assert.deepEqual(calls(r), ["read", "turnOn", "turnOn"]);
    assert.ok(r.w.power.isOn(plugOf(r.w)));
    // No off was sent: it is told as a switch-on, not as a power cycle.
    assert.deepEqual(r.w.reporter.of("revived"), [{ type: "revived", machine: "worker-1", node: "worker-1", how: "power-on" }]);
    assert.deepEqual(r.w.reporter.of("stranded"), []);
  });
});
