// Plug reads and switch commands, and what their answers do to plugpool's memory: the inrush budget, the power-on
// record, the plug state a lost answer leaves, the draw a sensor's reading stands for, and a boot that failed at
// the plug. Each is tried on a domain context over a world's fakes, whose memory the test can look at and set.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { PlugReading, PowerSwitch } from "../../src/domain/index.ts";
import { PlugpoolError } from "../../src/domain/index.ts";
import type { PoolContext } from "../../src/domain/context.ts";
import { beginPowerOff, bootFailed, bootStarted, stateOf } from "../../src/domain/lifecycle.ts";
import type { PowerOffJob } from "../../src/domain/power-off-job.ts";
import { lifecycleOf, type Lifecycle } from "../../src/domain/lifecycle.ts";
import { powerOnSlotWait, readPlug, restorePower, switchOff, switchOn, takePowerOnSlot } from "../../src/domain/switching.ts";
import { World, type WorldOptions } from "../harness/fakes/world.ts";

/** The world's plugs, except that switch commands answer with `answer` once they acted (a plug that lies). */
function answering(w: World, answer: PlugReading): PowerSwitch {
  return {
    read: (control, options) => w.power.read(control, options),
    turnOn: async (control, options) => {
      await w.power.turnOn(control, options);
      return answer;
    },
    turnOff: async (control, mayCut, options) => {
      await w.power.turnOff(control, mayCut, options);
      return answer;
    },
  };
}

/** The lifecycle of the machine at each switch command, taken at the moment the command is sent. */
function phasesAtCalls(w: World, ctx: PoolContext, name = "worker-1"): Lifecycle[] {
  const seen: Lifecycle[] = [];
  w.power.onCall = (call) => {
    if (call.op !== "read") seen.push(lifecycleOf(ctx, w.machine(name)));
  };
  return seen;
}

const LEARNED = { type: "device-learned", machine: "worker-1", identity: "device plug-worker-1" } as const;
const JOB = { node: "", startedAt: 0, aborting: undefined, facts: {} } as unknown as PowerOffJob;

describe("the inrush budget", () => {
  it("is unlimited without a configured limit: no wait, every slot free, and no window kept", () => {
    const w = new World();
    const ctx = w.context();
    assert.equal(powerOnSlotWait(ctx), 0, "a new pool without a limit does not wait an interval");
    assert.equal(takePowerOnSlot(ctx), true);
    assert.equal(takePowerOnSlot(ctx), true);
    assert.equal(takePowerOnSlot(ctx), true);
    assert.deepEqual(ctx.memory.powerOnsSent, [], "nothing would ever trim the window: it must not grow");
  });

  it("counts each plug-on for the configured interval, not the default one", () => {
    const w = new World({ scaleUp: { maxPowerOnsPerInterval: 1, powerOnIntervalMs: 60_000 } });
    const ctx = w.context();
    assert.equal(powerOnSlotWait(ctx), 60_000, "a new pool waits one interval");
    assert.equal(takePowerOnSlot(ctx), false);
    w.clock.advance(60_000);
    assert.equal(powerOnSlotWait(ctx), 0);
    assert.equal(takePowerOnSlot(ctx), true);
    assert.equal(powerOnSlotWait(ctx), 60_000);
    w.clock.advance(15_000);
    assert.equal(powerOnSlotWait(ctx), 45_000, "still in the window 15 s later (longer than the default 10 s)");
    assert.equal(takePowerOnSlot(ctx), false);
    w.clock.advance(45_000);
    assert.equal(powerOnSlotWait(ctx), 0);
    assert.equal(takePowerOnSlot(ctx), true);
    assert.deepEqual(ctx.memory.powerOnsSent, [120_000], "the plug-on that left the window is dropped");
  });
});

describe("switchOn()", () => {
  it("records the power-on, switches the plug on, and reports it confirmed, the machine booting from now", async () => {
    const w = new World();
    const ctx = w.context();
    const m = w.machine("worker-1");
    const phases = phasesAtCalls(w, ctx);
    w.clock.advance(5000);
    await switchOn(ctx, m, "scale-up");
    const now = w.clock.now();
    assert.deepEqual(phases, [{ phase: "switching", to: "on" }]);
    assert.ok(w.power.isOn(m.power));
    assert.deepEqual(w.records.powerOn("worker-1"), { at: now, why: "scale-up" });
    assert.deepEqual(w.reporter.events, [LEARNED, { type: "powered-on", machine: "worker-1", group: "workers", confirmed: true }]);
    const st = stateOf(ctx, m);
    assert.equal(st.power.plug, "on");
    assert.equal(st.poweredOnAt, now);
    assert.equal(st.boot.startedAt, now);
    assert.deepEqual(lifecycleOf(ctx, m), { phase: "booting", since: now });
  });

  it("switches nothing and reports why when the power-on cannot be recorded", async () => {
    const w = new World();
    const ctx = w.context();
    const m = w.machine("worker-1");
    w.records.failNext();
    await assert.rejects(switchOn(ctx, m, "scale-up"), { code: "cluster-refused" });
    assert.deepEqual(w.power.calls, []);
    assert.deepEqual(w.reporter.events, [
      {
        type: "power-on-failed",
        machine: "worker-1",
        group: "workers",
        error: "recording the power-on: recording the power-on of worker-1: the apiserver said no",
      },
    ]);
    assert.deepEqual(lifecycleOf(ctx, m), { phase: "unknown" }, "no command left in flight");
  });

  it("counts a lost answer as plugpool's power-on, unconfirmed, and leaves the plug unknown", async () => {
    const w = new World();
    const ctx = w.context();
    const m = w.machine("worker-1");
    await readPlug(ctx, m);
    assert.equal(stateOf(ctx, m).power.plug, "off");
    w.power.loseNextAnswer("turnOn");
    await switchOn(ctx, m, "queued");
    const now = w.clock.now();
    assert.ok(w.power.isOn(m.power));
    assert.deepEqual(w.records.powerOn("worker-1"), { at: now, why: "queued" }, "the record stands");
    assert.deepEqual(w.reporter.events, [LEARNED, { type: "powered-on", machine: "worker-1", group: "workers", confirmed: false }]);
    assert.equal(stateOf(ctx, m).power.plug, "unknown");
    assert.deepEqual(lifecycleOf(ctx, m), { phase: "booting", since: now }, "no command left in flight");
  });

  it("fails, ends the record and reports it when the plug still reads off after the command", async () => {
    const w = new World();
    const ctx = w.context({ power: answering(w, { on: false }) });
    const m = w.machine("worker-1");
    await assert.rejects(switchOn(ctx, m, "scale-up"), { code: "plug-bad-answer", message: "plug of worker-1 still reads off after turn_on" });
    assert.equal(w.records.powerOn("worker-1"), undefined);
    assert.deepEqual(w.reporter.events, [
      LEARNED,
      { type: "power-on-failed", machine: "worker-1", group: "workers", error: "plug of worker-1 still reads off after turn_on" },
    ]);
    assert.equal(stateOf(ctx, m).power.plug, "off", "the answer is the plug's newest state");
    assert.equal(stateOf(ctx, m).poweredOnAt, undefined);
    assert.deepEqual(lifecycleOf(ctx, m), { phase: "off" });
  });
});

describe("restorePower()", () => {
  it("switches a registered machine back on and reports it, powered from now when it was not known on", async () => {
    const w = new World();
    w.register("worker-1");
    const ctx = w.context();
    const m = w.machine("worker-1");
    const phases = phasesAtCalls(w, ctx);
    assert.deepEqual(await restorePower(ctx, m, "worker-1"), { on: true });
    assert.deepEqual(phases, [{ phase: "switching", to: "on" }]);
    assert.deepEqual(w.reporter.events, [LEARNED, { type: "power-restored", machine: "worker-1", group: "workers", node: "worker-1" }]);
    const st = stateOf(ctx, m);
    assert.equal(st.power.plug, "on");
    assert.equal(st.poweredOnAt, w.clock.now());
    assert.equal(w.records.powerOn("worker-1"), undefined, "records nothing");
  });

  it("keeps when the machine was first powered and when its boot started", async () => {
    const w = new World();
    w.register("worker-1");
    const ctx = w.context();
    const m = w.machine("worker-1");
    const st = stateOf(ctx, m);
    const then = w.clock.now();
    bootStarted(ctx, m);
    w.clock.advance(30_000);
    await restorePower(ctx, m, "worker-1");
    assert.equal(st.poweredOnAt, then);
    assert.equal(st.boot.startedAt, then);
  });

  it("reports nothing itself when quiet (its caller tells why)", async () => {
    const w = new World();
    w.register("worker-1");
    const ctx = w.context();
    await restorePower(ctx, w.machine("worker-1"), "worker-1", undefined, true);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.deepEqual(w.reporter.events, [LEARNED]);
  });

  it("leaves the plug unknown when the answer is lost, and reports the failure", async () => {
    const w = new World();
    w.register("worker-1");
    const ctx = w.context();
    const m = w.machine("worker-1");
    await readPlug(ctx, m);
    w.power.loseNextAnswer("turnOn");
    await assert.rejects(restorePower(ctx, m, "worker-1"), { code: "plug-unconfirmed" });
    assert.deepEqual(w.reporter.events, [
      LEARNED,
      { type: "power-on-failed", machine: "worker-1", group: "workers", error: "turnOn of plug of worker-1: sent, but its answer was lost" },
    ]);
    assert.equal(stateOf(ctx, m).power.plug, "unknown", "never 'off' as before: the command may have acted");
    assert.equal(lifecycleOf(ctx, m).phase, "registered");
  });

  it("keeps the plug state as known when the command failed before it was sent", async () => {
    const w = new World();
    w.register("worker-1");
    const ctx = w.context();
    const m = w.machine("worker-1");
    await readPlug(ctx, m);
    w.power.failNext("turnOn");
    await assert.rejects(restorePower(ctx, m, "worker-1"), { code: "plug-unreachable" });
    assert.equal(stateOf(ctx, m).power.plug, "off");
    assert.equal(lifecycleOf(ctx, m).phase, "registered");
  });
});

describe("switchOff()", () => {
  const booting = (options: WorldOptions = {}): { w: World; ctx: PoolContext } => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"], ...options });
    return { w, ctx: w.context() };
  };

  it("cuts a machine cluster-autoscaler dropped before it registered, ends its record and counts its failed boot", async () => {
    const { w, ctx } = booting();
    const m = w.machine("worker-1");
    const st = stateOf(ctx, m);
    assert.equal(st.boot.startedAt, w.clock.now(), "booting since its record");
    const phases = phasesAtCalls(w, ctx);
    assert.deepEqual(await switchOff(ctx, m, { reason: "unregistered" }), { kind: "off" });
    assert.deepEqual(phases, [{ phase: "switching", to: "off" }]);
    assert.equal(w.power.isOn(m.power), false);
    assert.equal(w.records.powerOn("worker-1"), undefined);
    const until = w.clock.now() + 600_000;
    assert.deepEqual(w.reporter.events, [
      LEARNED,
      { type: "plug-off", machine: "worker-1", reason: "unregistered" },
      {
        type: "quarantined",
        machine: "worker-1",
        group: "workers",
        until,
        failures: 1,
        reason: "cluster-autoscaler dropped it before it registered",
      },
    ]);
    assert.equal(st.power.plug, "off");
    assert.equal(st.boot.startedAt, undefined, "the boot is over");
    assert.equal(st.poweredOnAt, undefined);
  });

  it("counts no failed boot for a cut that is not cluster-autoscaler dropping the machine", async () => {
    const { w, ctx } = booting();
    const m = w.machine("worker-1");
    assert.deepEqual(await switchOff(ctx, m, { reason: "power-off", graceEnded: "elapsed" }), { kind: "off" });
    assert.deepEqual(w.reporter.events, [LEARNED, { type: "plug-off", machine: "worker-1", reason: "power-off", graceEnded: "elapsed" }]);
    assert.equal(stateOf(ctx, m).boot.failures, 0);
  });

  it("counts no second failure for a boot whose failure was already seen", async () => {
    const { w, ctx } = booting();
    const m = w.machine("worker-1");
    const st = stateOf(ctx, m);
    bootFailed(ctx, m, { code: "plug-off-while-booting", message: "seen before" });
    assert.deepEqual(await switchOff(ctx, m, { reason: "unregistered" }), { kind: "off" });
    assert.deepEqual(w.reporter.events, [LEARNED, { type: "plug-off", machine: "worker-1", reason: "unregistered" }]);
    assert.equal(st.boot.failures, 0);
    assert.equal(st.boot.failure, undefined);
  });

  it("reports the draw before the cut of a plug with a sensor", async () => {
    const { w, ctx } = booting({ groups: [{ id: "workers", machines: ["worker-1"], sensors: ["worker-1"] }] });
    const m = w.machine("worker-1");
    w.power.setWatts(m.power, 3);
    await readPlug(ctx, m);
    w.reporter.clear();
    assert.deepEqual(await switchOff(ctx, m, { reason: "power-off" }), { kind: "off" });
    assert.deepEqual(w.reporter.of("plug-off"), [{ type: "plug-off", machine: "worker-1", reason: "power-off", watts: 3 }]);
    assert.equal(stateOf(ctx, m).power.watts, 0);
  });

  it("is refused, with nothing sent, when the device answers as another one", async () => {
    const { w, ctx } = booting({ groups: [{ id: "workers", machines: ["worker-1"], identities: { "worker-1": "device elsewhere" } }] });
    const m = w.machine("worker-1");
    assert.deepEqual(await switchOff(ctx, m, { reason: "unregistered" }), {
      kind: "refused",
      verdict: {
        allowed: false,
        rule: "device-mismatch",
        detail: "turnOff of plug of worker-1: the device answered as device plug-worker-1; nothing sent",
      },
    });
    assert.ok(w.power.isOn(m.power));
    assert.deepEqual(w.records.powerOn("worker-1")?.why, "scale-up", "the record stands");
    assert.equal(lifecycleOf(ctx, m).phase, "booting", "no command left in flight");
  });

  it("ends the record and leaves the plug unknown when the answer is lost", async () => {
    const { w, ctx } = booting();
    const m = w.machine("worker-1");
    await readPlug(ctx, m);
    w.power.loseNextAnswer("turnOff");
    assert.deepEqual(await switchOff(ctx, m, { reason: "unregistered" }), {
      kind: "unconfirmed",
      error: "turnOff of plug of worker-1: sent, but its answer was lost",
    });
    assert.equal(w.records.powerOn("worker-1"), undefined, "whoever powers it next is not plugpool");
    assert.equal(stateOf(ctx, m).power.plug, "unknown");
    assert.deepEqual(lifecycleOf(ctx, m), { phase: "unknown" });
    assert.deepEqual(w.reporter.events, [LEARNED]);
  });

  it("stops counting time on or off from an unconfirmed cut until the next reading", async () => {
    const { w, ctx } = booting();
    const m = w.machine("worker-1");
    await readPlug(ctx, m);
    w.clock.advance(1000);
    w.power.loseNextAnswer("turnOff");
    await switchOff(ctx, m, { reason: "unregistered" });
    w.clock.advance(5000);
    await readPlug(ctx, m);
    const { meter } = stateOf(ctx, m);
    assert.equal(meter.onMs, 1000);
    assert.equal(meter.offMs, 0);
  });

  it("is refused when the guard refused at the plug, whatever the plug then says about the answer", async () => {
    const w = new World({ on: ["worker-1"] });
    const power: PowerSwitch = {
      read: (control, options) => w.power.read(control, options),
      turnOn: (control, options) => w.power.turnOn(control, options),
      turnOff: async (_control, mayCut) => {
        assert.equal(await mayCut(), false);
        throw new PlugpoolError("plug-unconfirmed", "turnOff: no answer");
      },
    };
    const ctx = w.context({ power: power });
    const m = w.machine("worker-1");
    await readPlug(ctx, m);
    assert.deepEqual(await switchOff(ctx, m, { reason: "unregistered" }), {
      kind: "refused",
      verdict: { allowed: false, rule: "powered-outside", detail: "worker-1 was not switched on by plugpool and keeps its power" },
    });
    assert.equal(stateOf(ctx, m).power.plug, "on", "nothing was sent: the plug is as it was read");
    assert.deepEqual(lifecycleOf(ctx, m), { phase: "powered-outside" });
  });

  it("fails, keeping the record, when the plug still reads on after the command", async () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    const ctx = w.context({ power: answering(w, { on: true }) });
    const m = w.machine("worker-1");
    await assert.rejects(switchOff(ctx, m, { reason: "unregistered" }), {
      code: "plug-bad-answer",
      message: "plug of worker-1 still reads on after turn_off",
    });
    assert.notEqual(w.records.powerOn("worker-1"), undefined);
    assert.deepEqual(w.reporter.events, [LEARNED]);
    assert.equal(stateOf(ctx, m).power.plug, "on");
    assert.equal(stateOf(ctx, m).boot.failures, 0);
  });
});

describe("readPlug()", () => {
  it("hears the device say what it is only for a checked reading", async () => {
    const w = new World({ on: ["worker-1"] });
    const ctx = w.context();
    const m = w.machine("worker-1");
    assert.deepEqual(await readPlug(ctx, m), { on: true });
    assert.deepEqual(w.reporter.events, []);
    assert.equal(w.records.deviceIdentity("worker-1"), undefined);
    assert.deepEqual(await readPlug(ctx, m, undefined, true), { on: true });
    assert.deepEqual(w.reporter.events, [LEARNED]);
    assert.equal(w.records.deviceIdentity("worker-1"), "device plug-worker-1");
  });

  it("takes a sensor's draw as it is, a slightly negative one as 0 W, and one below -1 W as unknown", async () => {
    const w = new World({ on: ["worker-1"], groups: [{ id: "workers", machines: ["worker-1"], sensors: ["worker-1"] }] });
    const ctx = w.context();
    const m = w.machine("worker-1");
    const { power } = stateOf(ctx, m);
    const cases: [number, PlugReading, number | undefined][] = [
      [80, { on: true, watts: 80 }, 80],
      [0, { on: true, watts: 0 }, 0],
      [-0.5, { on: true, watts: 0 }, 0],
      [-1, { on: true, watts: 0 }, 0],
      [-1.5, { on: true }, undefined],
    ];
    for (const [sensor, reading, known] of cases) {
      w.power.setWatts(m.power, sensor);
      assert.deepEqual(await readPlug(ctx, m), reading, `sensor at ${sensor} W`);
      assert.equal(power.watts, known, `sensor at ${sensor} W`);
    }
  });

  it("counts a machine powered from when it is first seen on, and not once it is seen off", async () => {
    const w = new World({ on: ["worker-1"] });
    const ctx = w.context();
    const m = w.machine("worker-1");
    const st = stateOf(ctx, m);
    const first = w.clock.now();
    await readPlug(ctx, m);
    assert.equal(st.poweredOnAt, first);
    w.clock.advance(10_000);
    await readPlug(ctx, m);
    assert.equal(st.poweredOnAt, first, "seen on again: still powered since it was first seen");
    w.power.set(m.power, false);
    await readPlug(ctx, m);
    assert.equal(st.poweredOnAt, undefined);
    await readPlug(ctx, m);
    assert.equal(st.poweredOnAt, undefined);
  });

  it("keeps the power-on time of a machine plugpool switched on that registered, whose plug reads off", async () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    w.register("worker-1");
    const ctx = w.context();
    const m = w.machine("worker-1");
    const st = stateOf(ctx, m);
    const at = w.clock.now();
    w.clock.advance(10_000);
    w.power.set(m.power, false);
    assert.deepEqual(await readPlug(ctx, m), { on: false });
    assert.equal(st.poweredOnAt, at);
    assert.notEqual(w.records.powerOn("worker-1"), undefined, "its Node ends the record, not the reading");
    assert.deepEqual(w.reporter.events, []);
  });

  it("takes a booting machine read off for a failed boot: ends its record, reports it and quarantines it", async () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    const ctx = w.context();
    const m = w.machine("worker-1");
    const st = stateOf(ctx, m);
    w.power.set(m.power, false);
    assert.deepEqual(await readPlug(ctx, m), { on: false });
    const message = "plug of worker-1 reads off again before the machine registered";
    assert.equal(w.records.powerOn("worker-1"), undefined);
    assert.deepEqual(w.reporter.events, [
      { type: "unexpected-power", machine: "worker-1", detail: message },
      { type: "quarantined", machine: "worker-1", group: "workers", until: w.clock.now() + 600_000, failures: 1, reason: message },
    ]);
    assert.deepEqual(st.boot.failure, { code: "plug-off-while-booting", message });
    assert.equal(st.boot.startedAt, undefined);
    assert.equal(st.poweredOnAt, undefined);
  });

  it("ends the record of a booting machine read off whose failure was already seen, counting no second one", async () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    const ctx = w.context();
    const m = w.machine("worker-1");
    const st = stateOf(ctx, m);
    const failure = { code: "plug-off-while-booting", message: "seen before" };
    bootFailed(ctx, m, failure);
    w.power.set(m.power, false);
    await readPlug(ctx, m);
    assert.equal(w.records.powerOn("worker-1"), undefined);
    assert.deepEqual(w.reporter.events, []);
    assert.equal(st.boot.failure, failure);
    assert.equal(st.boot.failures, 0);
  });

  it("leaves a machine being powered off to its power-off when its plug reads off", async () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    const ctx = w.context();
    const m = w.machine("worker-1");
    beginPowerOff(ctx, m, JOB);
    w.power.set(m.power, false);
    assert.deepEqual(await readPlug(ctx, m), { on: false });
    assert.notEqual(w.records.powerOn("worker-1"), undefined);
    assert.deepEqual(w.reporter.events, []);
    assert.equal(stateOf(ctx, m).boot.failure, undefined);
  });

  it("drops a reading that a switch answer overtook", async () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    const ctx = w.context();
    const m = w.machine("worker-1");
    const read = readPlug(ctx, m);
    const cut = switchOff(ctx, m, { reason: "power-off" });
    assert.equal(await read, undefined);
    assert.deepEqual(await cut, { kind: "off" });
    assert.equal(stateOf(ctx, m).power.plug, "off");
  });
});
