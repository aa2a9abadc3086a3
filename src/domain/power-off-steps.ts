// The power-off saga (SPEC §5) as an ordered list of named steps. Each step checks first, then acts: a step
// whose work is already done (in this job, or visibly on the cluster) is a no-op, so the runner can walk the
// list from the top on every pass and after a restart.
import type { CallOptions } from "./ports.ts";
import type { Machine } from "./model.ts";
import type { PowerOffStep, SafetyRule } from "./events.ts";
import type { MachineState, PoolContext, PowerOffJob } from "./state.ts";
import { nodesOf } from "./state.ts";
import { POWER_OFF_ANNOTATION } from "./model.ts";
import { mayCutPower } from "./safety.ts";
import { readPlug, switchOff } from "./switching.ts";

/** What one step needs. `now` is read once, just before the step runs (timeouts come from stored times). */
export interface StepContext {
  readonly pool: PoolContext;
  readonly machine: Machine;
  readonly state: MachineState;
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

/** One named step of the saga. */
export interface PowerOffStepSpec {
  readonly name: PowerOffStep;
  run(ctx: StepContext): Promise<StepOutcome>;
}

const AWAIT_NOT_READY_POLL_MS = 5000;
const SENSOR_POLL_MS = 2000;
const POD_GONE_POLL_MS = 1000;

function done(detail: string): StepOutcome {
  return { kind: "done", detail };
}

function wait(afterMs: number, why: string): StepOutcome {
  return { kind: "wait", afterMs: Math.max(0, afterMs), why };
}

const checkTaint: PowerOffStepSpec = {
  name: "check-taint",
  async run({ pool, machine, job, options }) {
    // Once this job has cut the power there is nothing left to keep on.
    if (job.plugOff) return done("power already cut");
    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);
    if (!verdict.allowed) return { kind: "abort", reason: `keeping power: ${verdict.detail}`, rule: verdict.rule };
    const nodes = nodesOf(pool, machine);
    for (const node of nodes) {
      if (node.annotations[POWER_OFF_ANNOTATION] === undefined) {
        await pool.deps.teardown.markPowerOff(node.name, job.startedAt, options);
      }
    }
    return done(nodes.length === 0 ? "no node" : "node carries the ToBeDeleted taint");
  },
};

const powerOffPod: PowerOffStepSpec = {
  name: "power-off-pod",
  async run({ pool, machine, state, job, options }) {
    if (job.podCreated || job.podRemoved) return done("power-off pod created");
    if (pool.deps.cluster.powerOffPod(machine.name) !== undefined) return done("power-off pod exists");
    const node = nodesOf(pool, machine)[0];
    if (node === undefined) return done("no node to shut down");
    if (!node.ready) return done("node already NotReady");
    if (state.plug === "off") return done("plug already off");
    await pool.deps.teardown.createPowerOffPod(machine, node.name, job.startedAt, options);
    job.podCreated = true;
    return done(`power-off pod created on ${node.name}`);
  },
};

const awaitNotReady: PowerOffStepSpec = {
  name: "await-not-ready",
  run({ pool, machine, state, job, now }) {
    if (job.notReadyAt !== undefined) return Promise.resolve(done("node NotReady"));
    const node = nodesOf(pool, machine)[0];
    if (node === undefined || !node.ready) {
      job.notReadyAt = node?.readyChangedAt ?? now;
      return Promise.resolve(done(node === undefined ? "node gone" : "node NotReady"));
    }
    if (state.plug === "off") {
      job.notReadyAt = now;
      return Promise.resolve(done("plug already off"));
    }
    const deadline = job.startedAt + pool.config.powerOff.notReadyTimeoutMs;
    const remaining = deadline - now;
    if (remaining <= 0) {
      job.notReadyAt = deadline;
      return Promise.resolve(done("timed out, carrying on"));
    }
    return Promise.resolve(wait(Math.min(remaining, AWAIT_NOT_READY_POLL_MS), "waiting for the node to go NotReady"));
  },
};

const grace: PowerOffStepSpec = {
  name: "grace",
  async run({ pool, machine, state, job, now, options }) {
    if (job.graceEnded !== undefined) return done(`grace ended (${job.graceEnded})`);
    if (state.plug === "off") return done("plug already off");
    const settings = pool.config.powerOff;
    const remaining = (job.notReadyAt ?? now) + settings.graceMs - now;
    if (remaining <= 0) {
      job.graceEnded = "elapsed";
      return done("grace elapsed");
    }
    if (machine.plug.powerSensor === undefined) return wait(remaining, "grace");
    // A failed read is no reason to stop waiting: the grace still ends on time.
    const reading = await readPlug(pool, machine, options).catch(() => undefined);
    if (reading?.on === false) return done("plug reads off");
    const watts = reading?.watts;
    if (watts === undefined || watts > settings.standbyWatts) {
      job.standbySince = undefined;
      return wait(Math.min(remaining, SENSOR_POLL_MS), `grace, drawing ${watts ?? "?"} W`);
    }
    job.standbySince ??= now;
    const standbyLeft = job.standbySince + settings.standbyWindowMs - now;
    if (standbyLeft <= 0) {
      job.graceEnded = "standby";
      return done(`draw at standby (${watts} W)`);
    }
    return wait(Math.min(remaining, SENSOR_POLL_MS, standbyLeft), `grace, standby draw (${watts} W)`);
  },
};

const plugOff: PowerOffStepSpec = {
  name: "plug-off",
  async run({ pool, machine, job, options }) {
    if (job.plugOff) return done("plug off");
    // The last word before the irreversible step (SPEC §9.1): nothing is awaited between it and the command.
    const verdict = mayCutPower(machine, pool.deps.cluster, pool.config.providerIDPrefix);
    if (!verdict.allowed) return { kind: "abort", reason: `keeping power: ${verdict.detail}`, rule: verdict.rule };
    const cut = job.graceEnded === undefined ? {} : { graceEnded: job.graceEnded };
    await switchOff(pool, machine, { reason: "power-off", ...cut }, options);
    job.plugOff = true;
    return done("plug off");
  },
};

const removePod: PowerOffStepSpec = {
  name: "remove-pod",
  async run({ pool, machine, job, options }) {
    const pod = pool.deps.cluster.powerOffPod(machine.name);
    if (pod === undefined) {
      job.podRemoved = true;
      return done("power-off pod gone");
    }
    if (!pod.terminating) await pool.deps.teardown.deletePowerOffPod(machine, options);
    return wait(POD_GONE_POLL_MS, "waiting for the power-off pod to go");
  },
};

const deleteNode: PowerOffStepSpec = {
  name: "delete-node",
  async run({ pool, machine, job, options }) {
    const nodes = nodesOf(pool, machine);
    if (nodes.length === 0) return done(job.deletedNodes.size === 0 ? "no node" : "node deleted");
    // Waiting until the view shows the Node gone keeps a lagging view from resuming a finished power-off.
    for (const node of nodes) {
      await pool.deps.teardown.deleteNode(node.name, options);
      if (!job.deletedNodes.has(node.name)) {
        job.deletedNodes.add(node.name);
        pool.deps.reporter.report({ type: "node-deleted", machine: machine.name, node: node.name });
      }
    }
    return wait(POD_GONE_POLL_MS, "waiting for the Node to go");
  },
};

/** The steps of a power-off, in the order they run (SPEC §5). */
export const POWER_OFF_STEPS: readonly PowerOffStepSpec[] = [
  checkTaint,
  powerOffPod,
  awaitNotReady,
  grace,
  plugOff,
  removePod,
  deleteNode,
];
