// The power-off saga as an ordered list of named steps. Each step checks first, then acts: a step
// whose work is already done (in this job, or visibly on the cluster) is a no-op, so the runner can walk the
// list from the top on every pass and after a restart.
import type { CallOptions } from "./ports.ts";
import type { Machine, NodeView } from "./model.ts";
import type { PowerOffStep, SafetyRule } from "./events.ts";
import { POWER_OFF_STEP_NAMES } from "./events.ts";
import type { PoolContext } from "./context.ts";
import type { PowerOffJob } from "./power-off-job.ts";
import { establish, establishOnce, nodeDeleted, notReadyNoLaterThan, podAdopted, podCreated, retract, shutdownAsked } from "./power-off-job.ts";
import type { Verdict } from "./safety.ts";
import { powerOffRecordOf } from "./model.ts";
import { stateOf } from "./lifecycle.ts";
import { hasDeletionTaint, instanceId, nodesOf } from "./matching.ts";
import { isPlugpoolError, PlugpoolError } from "./errors.ts";
import { deviceCheck } from "./device-identity.ts";
import { freshVerdict, isTransient, mayCutPower, watchShutdownNode } from "./safety.ts";
import { readPlug, switchOff } from "./switching.ts";

/** What one step needs. `now` is read once, just before the step runs (timeouts come from stored times). */
export interface StepContext {
  readonly pool: PoolContext;
  readonly machine: Machine;
  readonly job: PowerOffJob;
  readonly now: number;
  readonly options?: CallOptions;
}

/**
 * How a step ended: done (go on to the next), wait (call again after `afterMs`), abort (stop the power-off and
 * undo what others can see), retry (it failed; try again after a backoff). A thrown error counts as retry.
 */
export type StepOutcome =
  | { readonly kind: "done"; readonly detail?: string }
  | { readonly kind: "wait"; readonly afterMs: number; readonly why: string }
  | { readonly kind: "abort"; readonly reason: string; readonly rule?: SafetyRule }
  | { readonly kind: "retry"; readonly error: string };

/** One step of the saga: checks first, then acts. */
interface StepRun {
  run(ctx: StepContext): Promise<StepOutcome>;
}

/** One named step of the saga. */
export interface PowerOffStepSpec extends StepRun {
  readonly name: PowerOffStep;
}

const AWAIT_NOT_READY_POLL_MS = 5000;
const SENSOR_POLL_MS = 2000;
const POD_GONE_POLL_MS = 1000;

/** A switch-off of this job went through, or may have: nothing may be undone any more. */
function mayBeCut(job: PowerOffJob): boolean {
  return job.facts.plugOff !== undefined || job.facts.cutUnconfirmed !== undefined;
}

/** How the grace ended, if it has: its time ran out, or the draw stayed at standby for the window. */
function graceEnded(job: PowerOffJob): "elapsed" | "standby" | undefined {
  return job.facts.standbyReached !== undefined ? "standby" : job.facts.graceElapsed !== undefined ? "elapsed" : undefined;
}

function done(detail: string): StepOutcome {
  return { kind: "done", detail };
}

function wait(afterMs: number, why: string): StepOutcome {
  return { kind: "wait", afterMs: Math.max(0, afterMs), why };
}

type RefusedVerdict = Verdict & { readonly allowed: false };

function abort(verdict: RefusedVerdict): StepOutcome {
  if (isTransient(verdict)) return { kind: "retry", error: `not now: ${verdict.detail}` };
  return { kind: "abort", reason: `keeping power: ${verdict.detail}`, rule: verdict.rule };
}

const checkTaint: StepRun = {
  async run({ pool, machine, job, now, options }) {
    // Once this job may have cut the power there is nothing left to keep on: the plug-off step finds out.
    if (mayBeCut(job)) return done("power may already be cut");
    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);
    if (!verdict.allowed) return abort(verdict);
    const nodes = nodesOf(pool, machine);
    // The job commits its record first, on its Node whatever the view shows yet (none, or the call's pending
    // one): from here on a restart resumes it. A Node that registered since gets it too; one the view shows with
    // this very record committed has it already (a view shows only what was written).
    const shown = new Map(nodes.map((n) => [n.name, powerOffRecordOf(n)]));
    const committed = (name: string): boolean => {
      const record = shown.get(name);
      return record?.pending === false && record.startedAt === job.startedAt;
    };
    const commit = new Set(nodes.map((n) => n.name).filter((name) => !committed(name)));
    if (job.facts.recordCommitted === undefined && job.node !== "" && !committed(job.node)) commit.add(job.node);
    for (const node of commit) await pool.deps.teardown.markPowerOff(node, { startedAt: job.startedAt, pending: false }, options);
    establishOnce(job, "recordCommitted", now);
    return done(nodes.length === 0 ? "no node" : "node carries the ToBeDeleted taint");
  },
};

const powerOffPod: StepRun = {
  async run({ pool, machine, job, now, options }) {
    if (job.facts.shutdownRequested !== undefined || job.facts.podRemoved !== undefined || mayBeCut(job)) {
      return done(machine.power.shutsDown === true ? "OS shutdown requested" : "power-off pod created");
    }
    const existing = pool.deps.cluster.powerOffPod(machine.name);
    if (existing?.terminating === true) return wait(POD_GONE_POLL_MS, "waiting for an earlier power-off pod to go");
    if (existing !== undefined && job.podAttempts === 0) {
      // An earlier run of plugpool created it: this job resumes that one.
      shutdownAsked(job, now, nodesOf(pool, machine)[0], undefined);
      podAdopted(job);
      return done("power-off pod exists");
    }
    const node = nodesOf(pool, machine)[0];
    if (node === undefined) return done("no node to shut down");
    if (!node.ready) return done("node already NotReady");
    if (stateOf(pool, machine).power.plug === "off") return done("plug already off");
    if (machine.power.shutsDown === true) {
      const shutdown = pool.deps.power.shutdown?.bind(pool.deps.power);
      if (shutdown === undefined) throw new PlugpoolError("internal", `the power switch cannot shut down ${machine.name} through its control`);
      // The verdict is taken by the device itself, with its slot held and right before the request: the wait in
      // its queue and its state read come before it, not after.
      let refusal: RefusedVerdict | undefined;
      let asked: NodeView | undefined;
      const mayShutDown = async (o?: CallOptions): Promise<boolean> => {
        const verdict = await shutdownVerdict(pool, machine, node, (n) => { asked = n; }, o);
        if (!verdict.allowed) refusal = verdict;
        return verdict.allowed;
      };
      try {
        await shutdown(machine.power, mayShutDown, { ...options, device: deviceCheck(pool, machine) });
      } catch (e) {
        if (refusal !== undefined) return abort(refusal);
        if (isPlugpoolError(e) && e.code === "device-mismatch") return abort({ allowed: false, rule: "device-mismatch", detail: e.message });
        throw e;
      }
      shutdownAsked(job, now, node, asked);
      return done(`OS shutdown of ${node.name} requested through ${machine.power.label}`);
    }
    let asked: NodeView | undefined;
    const verdict = await shutdownVerdict(pool, machine, node, (n) => { asked = n; }, options);
    if (!verdict.allowed) return abort(verdict);
    await pool.deps.teardown.createPowerOffPod(machine, node.name, job.startedAt, options);
    shutdownAsked(job, now, node, asked);
    podCreated(job);
    return done(`power-off pod created on ${node.name}`);
  },
};

/**
 * The verdict right before the OS is asked to shut down: taken on Nodes read fresh, then once more on the view,
 * with nothing awaited between it and the request. `asking` is told the Node as read fresh then (undefined when it
 * was not read): its Ready condition at the request.
 */
async function shutdownVerdict(pool: PoolContext, machine: Machine, node: NodeView, asking: (node: NodeView | undefined) => void, options?: CallOptions): Promise<Verdict> {
  const read = (fresh: readonly NodeView[]): void => { asking(fresh.find((n) => n.uid === node.uid)); };
  const fresh = await freshVerdict(pool, machine, "shutdown", options, read);
  return fresh.allowed ? mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix) : fresh;
}

const awaitNotReady: StepRun = {
  async run({ pool, machine, job, now, options }) {
    const nodes = nodesOf(pool, machine);
    const { facts } = job;
    if (facts.shutdownRequested !== undefined) watchShutdownNode(job, nodes, facts.shutdownRequested);
    if (facts.notReady !== undefined) {
      // NotReady must hold until the cut: a Node Ready again (a network blip, a pod that never ran, a reboot)
      // sends the power-off back to waiting for the shutdown, within the same deadline.
      const ready = facts.hardCut === undefined && !mayBeCut(job) ? nodes.find((n) => n.ready) : undefined;
      if (ready === undefined) return done(facts.hardCut === undefined ? "node NotReady" : "hard cut");
      if (facts.powerSeenOff !== undefined) {
        // A Node still shows Ready for a while after its machine lost power: the plug tells which it is. A plug
        // that cannot be read now may have power again: waited on as one that has, within the same deadline.
        const reading = await readPlug(pool, machine, options, true).catch(() => undefined);
        if (reading?.on === false) {
          establish(job, "plugOff", now);
          return done("plug reads off");
        }
      }
      // What built on the NotReady (the plug seen off, the grace, its standby) goes with it.
      retract(job, "notReady");
      pool.deps.reporter.report({
        type: "power-off-step",
        machine: machine.name,
        step: "await-not-ready",
        outcome: "waiting",
        detail: `node ${ready.name} is Ready again; waiting for the shutdown anew`,
      });
    }
    if (mayBeCut(job)) {
      establish(job, "notReady", now);
      return done("plug already off");
    }
    const node = nodes[0];
    if (node !== undefined && nodes.every((n) => !n.ready)) {
      establish(job, "notReady", node.readyChangedAt ?? now);
      return done("node NotReady");
    }
    if (node === undefined && job.node === "") {
      // The power-off began with no Node at all (a machine that never registered): nothing ran to wait for.
      establish(job, "notReady", now);
      return done("no node");
    }
    // Memory may be old (a plug switched by hand): only a reading taken now counts as "the machine has no power".
    if (stateOf(pool, machine).power.plug === "off" && (await readPlug(pool, machine, options, true).catch(() => undefined))?.on === false) {
      establish(job, "notReady", now);
      establish(job, "powerSeenOff", now);
      return done("plug reads off");
    }
    // A Node that vanished is no sign of a shutdown (deleted by hand, a kubelet re-registers it): wait on.
    const settings = pool.config.powerOff;
    const pod = pool.deps.cluster.powerOffPod(machine.name);
    const podTrouble = pod === undefined ? undefined : pod.terminating ? "is terminating" : pod.phase === "Failed" ? "failed" : pod.stuck;
    const deadline = job.startedAt + settings.notReadyTimeoutMs;
    const remaining = deadline - now;
    if ((podTrouble !== undefined || facts.podReplacing !== undefined) && remaining > 0) {
      if (job.podAttempts >= settings.maxPodAttempts) {
        return shutdownFailed(pool, machine, job, node?.name ?? "", `the power-off pod ${podTrouble ?? "failed"} after ${job.podAttempts} attempts`, deadline);
      }
      // Replaced once the apiserver says it is gone: a pod with the same name cannot be created before.
      establishOnce(job, "podReplacing", now);
      if (await pool.deps.teardown.deletePowerOffPod(machine, options)) {
        retract(job, "podReplacing");
        retract(job, "shutdownRequested");
      }
      return { kind: "retry", error: `the power-off pod ${podTrouble ?? "is going"}; replacing it (attempt ${job.podAttempts + 1} of ${settings.maxPodAttempts})` };
    }
    if (remaining <= 0) {
      return shutdownFailed(pool, machine, job, node?.name ?? "", `the node did not go NotReady within ${settings.notReadyTimeoutMs} ms`, deadline);
    }
    return wait(Math.min(remaining, AWAIT_NOT_READY_POLL_MS), "waiting for the node to go NotReady");
  },
};

/**
 * The OS did not shut down. By default the power-off stops and the machine keeps its power; only a configuration
 * that asks for it (`onShutdownTimeout: cut`) goes on to a hard cut, which is reported as such.
 */
function shutdownFailed(pool: PoolContext, machine: Machine, job: PowerOffJob, node: string, why: string, at: number): StepOutcome {
  if (pool.config.powerOff.onShutdownTimeout !== "cut") {
    return { kind: "abort", reason: `keeping power: ${why} (onShutdownTimeout is keep-power)` };
  }
  establish(job, "notReady", at);
  establish(job, "hardCut", at);
  pool.deps.reporter.report({ type: "hard-cut", machine: machine.name, node, detail: `${why}; cutting anyway (onShutdownTimeout is cut)` });
  return done(`${why}; hard cut`);
}

const grace: StepRun = {
  async run({ pool, machine, job, now, options }) {
    const ended = graceEnded(job);
    if (ended !== undefined) return done(`grace ended (${ended})`);
    if (mayBeCut(job)) return done("plug already off");
    const settings = pool.config.powerOff;
    // A wall clock stepped back puts the Node's NotReady time in the future: the grace counts from now instead, so
    // the step never lengthens it.
    notReadyNoLaterThan(job, now);
    const remaining = (job.facts.notReady ?? now) + settings.graceMs - now;
    if (remaining <= 0) {
      establish(job, "graceElapsed", now);
      return done("grace elapsed");
    }
    if (!machine.power.measuresWatts) return wait(remaining, "grace");
    // A failed read is no reason to stop waiting: the grace still ends on time.
    const reading = await readPlug(pool, machine, options, true).catch(() => undefined);
    if (reading?.on === false) return done("plug reads off");
    const watts = reading?.watts;
    if (watts === undefined || watts > settings.standbyWatts) {
      retract(job, "standby");
      return wait(Math.min(remaining, SENSOR_POLL_MS), `grace, drawing ${watts ?? "?"} W`);
    }
    establishOnce(job, "standby", now);
    const standbyLeft = (job.facts.standby ?? now) + settings.standbyWindowMs - now;
    if (standbyLeft <= 0) {
      establish(job, "standbyReached", now);
      return done(`draw at standby (${watts} W)`);
    }
    return wait(Math.min(remaining, SENSOR_POLL_MS, standbyLeft), `grace, standby draw (${watts} W)`);
  },
};

const plugOff: StepRun = {
  async run({ pool, machine, job, now, options }) {
    if (job.facts.plugOff !== undefined) return done("plug off");
    if (job.facts.cutUnconfirmed !== undefined) {
      // The last switch-off may have gone through: read the plug before anything else, and never undo a cut.
      let reading;
      try {
        reading = await readPlug(pool, machine, options, true);
      } catch (e) {
        // The address now reaches another device: this machine's plug cannot be read, now or later. Its machine is
        // held; what others see of the power-off is undone (the cut may have happened: nothing else is).
        if (isPlugpoolError(e) && e.code === "device-mismatch") return abort({ allowed: false, rule: "device-mismatch", detail: e.message });
        throw e;
      }
      if (reading === undefined) return { kind: "retry", error: "the plug's state is still unknown" };
      if (!reading.on) {
        establish(job, "plugOff", now);
        return done("plug reads off");
      }
      retract(job, "cutUnconfirmed");
      establish(job, "onAfterUnconfirmedCut", now);
    }
    // A first check on the view; the switch checks again on fresh Nodes at the plug, right before the request.
    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);
    if (!verdict.allowed) return abort(verdict);
    const ended = graceEnded(job);
    const cut = ended === undefined ? {} : { graceEnded: ended };
    const outcome = await switchOff(pool, machine, { reason: "power-off", ...cut }, options);
    switch (outcome.kind) {
      case "off":
        establish(job, "plugOff", now);
        return done(job.facts.hardCut === undefined ? "plug off" : "plug off (hard cut)");
      case "refused":
        return abort(outcome.verdict);
      case "unconfirmed":
        establish(job, "cutUnconfirmed", now);
        return { kind: "retry", error: `the switch-off was not confirmed, the plug may be off: ${outcome.error}` };
    }
  },
};

const removePod: StepRun = {
  async run({ pool, machine, job, now, options }) {
    if (job.facts.podRemoved !== undefined) return done("power-off pod gone");
    // Asked of the apiserver, not the view: a pod the view has not shown yet must not be left bound to the node.
    if (await pool.deps.teardown.deletePowerOffPod(machine, options)) {
      establish(job, "podRemoved", now);
      return done("power-off pod gone");
    }
    return wait(POD_GONE_POLL_MS, "waiting for the power-off pod to go");
  },
};

const deleteNode: StepRun = {
  async run({ pool, machine, job, options }) {
    // Judged on the Nodes as the apiserver has them now, not on the view: a Node deleted and registered anew
    // (Ready, untainted) while the view lags is not the drained one. Each is deleted under the uid it was judged
    // with, so one registered anew after this read is left alone.
    const fresh = await pool.deps.lookup.nodesClaiming(machine.name, instanceId(pool.config.providerIDPrefix, machine), options);
    // A Node Ready without the taint after the cut is not the drained one going away (someone powered the machine
    // again and it registered anew, or another machine claims the name): it is left alone and the power-off ends.
    const live = fresh.find((n) => n.ready && !hasDeletionTaint(n));
    if (live !== undefined) return done(`node ${live.name} is Ready without the taint after the cut; left alone`);
    // Nor is a Node without the taint that is not the one shut down: the machine registered anew after the cut. A
    // power-off pod still bound to its name may have shut that one down too: told, for someone to look.
    const anew = fresh.find((n) => !hasDeletionTaint(n) && job.shutdownNodeUid !== undefined && n.uid !== job.shutdownNodeUid);
    if (anew !== undefined) {
      const detail = `node ${anew.name} registered anew after the cut and is NotReady: if the power-off pod shut it down too, switch its machine off and on by hand`;
      if (!anew.ready) pool.deps.reporter.report({ type: "stranded", machine: machine.name, node: anew.name, detail });
      return done(`node ${anew.name} registered anew after the cut; left alone`);
    }
    // Switched on again since the cut (by hand), a machine may have been shut down anew by the power-off pod while it
    // was still bound to its Node's name: told, for someone to look, since this power-off ends here.
    if (fresh.length > 0 && job.deletedNodes.size === 0 && (await readPlug(pool, machine, options, true).catch(() => undefined))?.on === true) {
      const detail = `its plug reads on again after the cut: if the power-off pod shut it down anew, switch it off and on by hand`;
      pool.deps.reporter.report({ type: "stranded", machine: machine.name, node: fresh[0]?.name ?? job.node, detail });
    }
    // The Node is the evidence that the machine registered, which ended its power-on record: a restart must not
    // find that record standing once the Node is gone.
    if (fresh.length > 0) await pool.deps.records.stored(machine.name, options);
    for (const node of fresh) {
      await pool.deps.teardown.deleteNode(node.name, node.uid, options);
      if (nodeDeleted(job, node.name)) pool.deps.reporter.report({ type: "node-deleted", machine: machine.name, node: node.name });
    }
    // Waiting until the view shows the Node gone too keeps a lagging view from resuming a finished power-off.
    if (fresh.length === 0 && nodesOf(pool, machine).length === 0) return done(job.deletedNodes.size === 0 ? "no node" : "node deleted");
    return wait(POD_GONE_POLL_MS, "waiting for the Node to go");
  },
};

/** What each step does; the type makes every named step have one. */
const STEPS: { readonly [name in PowerOffStep]: StepRun } = {
  "check-taint": checkTaint,
  "power-off-pod": powerOffPod,
  "await-not-ready": awaitNotReady,
  grace,
  "plug-off": plugOff,
  "remove-pod": removePod,
  "delete-node": deleteNode,
};

/** The steps of a power-off, in the order they run. */
export const POWER_OFF_STEPS: readonly PowerOffStepSpec[] = POWER_OFF_STEP_NAMES.map((name) => ({ name, run: (ctx: StepContext) => STEPS[name].run(ctx) }));
