// One acting plugpool. Plugs, pods and Nodes take no fencing token, so the only guard against a second instance
// is that every irreversible act asks the Leadership right before it is made: a switch command in the device's
// slot (the same place as the cut guard), a cluster write just before its request. An act that passed its
// check when the process froze is the one exposure; the adapter behind Leadership keeps it short.
import type { Pool } from "./pool.ts";
import type { CallOptions, CutGuard, DeviceCheck, DeviceIdentity, Leadership, NodeTeardown, PowerRecords, PowerSwitch } from "./ports.ts";
import type { PoolDeps } from "./context.ts";
import { PlugpoolError } from "./errors.ts";

/** The refusal of `what` by a process that is not the acting plugpool; the message names the one that is. */
export function notActing(leadership: Leadership, what: string): PlugpoolError {
  const holder = leadership.holder();
  const who = holder === undefined ? "no other plugpool is known to act" : `the acting plugpool is ${holder}`;
  return new PlugpoolError("not-leader", `${what}: refused, this plugpool is not the acting one (${who})`);
}

/** Throws `not-leader` unless this process acts now. */
export function ensureActing(leadership: Leadership, what: string): void {
  if (!leadership.acting()) throw notActing(leadership, what);
}

/**
 * `check` (a cut guard, asked in the device's slot right before the request), then the leadership, last: the
 * check may take a while (it reads the Nodes afresh). Not acting, it throws `not-leader` and nothing is sent.
 */
export function actingGuard(leadership: Leadership, what: string, check: CutGuard): CutGuard {
  return async (options?: CallOptions) => {
    const allowed = await check(options);
    if (allowed) ensureActing(leadership, what);
    return allowed;
  };
}

/** As `actingGuard`, for the device check: a switch-on has no cut guard, so the leadership is asked after it. */
export function actingCheck(leadership: Leadership, what: string, check: DeviceCheck): DeviceCheck {
  return async (seen: DeviceIdentity, options?: CallOptions) => {
    const accepted = await check(seen, options);
    if (accepted) ensureActing(leadership, what);
    return accepted;
  };
}

/** The pool's ports with every irreversible act refused (`not-leader`, nothing sent) while not acting. Reads pass. */
export function actingOnly(deps: PoolDeps, leadership: Leadership): PoolDeps {
  return {
    ...deps,
    power: actingPower(deps.power, leadership),
    teardown: actingTeardown(deps.teardown, leadership),
    records: actingRecords(deps.records, leadership),
  };
}

function actingPower(power: PowerSwitch, leadership: Leadership): PowerSwitch {
  const shutdown = power.shutdown?.bind(power);
  return {
    read: (control, options) => power.read(control, options),
    turnOn: (control, options) =>
      power.turnOn(control, { ...options, device: actingCheck(leadership, `switching on ${control.label}`, options.device) }),
    turnOff: (control, mayCut, options) =>
      power.turnOff(control, actingGuard(leadership, `switching off ${control.label}`, mayCut), options),
    ...(shutdown && {
      shutdown: (control, mayShutDown, options) =>
        shutdown(control, actingGuard(leadership, `shutting down through ${control.label}`, mayShutDown), options),
    }),
  };
}

function actingTeardown(teardown: NodeTeardown, leadership: Leadership): NodeTeardown {
  const act = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    ensureActing(leadership, what);
    return fn();
  };
  return {
    markPowerOff: (node, record, options) =>
      act(`recording the power-off on Node ${node}`, () => teardown.markPowerOff(node, record, options)),
    clearPowerOffMark: (node, options) =>
      act(`clearing the power-off record on Node ${node}`, () => teardown.clearPowerOffMark(node, options)),
    createPowerOffPod: (machine, node, startedAt, options) =>
      act(`creating the power-off pod of ${machine.name}`, () => teardown.createPowerOffPod(machine, node, startedAt, options)),
    deletePowerOffPod: (machine, options) =>
      act(`deleting the power-off pod of ${machine.name}`, () => teardown.deletePowerOffPod(machine, options)),
    deleteNode: (node, uid, options) => act(`deleting Node ${node}`, () => teardown.deleteNode(node, uid, options)),
  };
}

function actingRecords(records: PowerRecords, leadership: Leadership): PowerRecords {
  return {
    powerOn: (machine) => records.powerOn(machine),
    quarantine: (machine) => records.quarantine(machine),
    recordPowerOn: async (machine, record, options) => {
      ensureActing(leadership, `recording the power-on of ${machine}`);
      return records.recordPowerOn(machine, record, options);
    },
    // Not refused: an end only takes a licence to cut away, and the records' versioned writes never overwrite a
    // record another instance wrote since. A power-on whose switch was refused for a leadership lost after its
    // record was written must end that record, or the next instance inherits a licence for a machine plugpool
    // never powered.
    endPowerOn: (machine) => {
      records.endPowerOn(machine);
    },
    setQuarantine: (machine, record) => {
      ensureActing(leadership, `recording the quarantine of ${machine}`);
      records.setQuarantine(machine, record);
    },
    deviceIdentity: (machine) => records.deviceIdentity(machine),
    recordDeviceIdentity: async (machine, id, options) => {
      ensureActing(leadership, `recording the device identity of ${machine}`);
      return records.recordDeviceIdentity(machine, id, options);
    },
    stored: async (machine, options) => {
      ensureActing(leadership, `storing the records of ${machine}`);
      return records.stored(machine, options);
    },
  };
}

/**
 * The pool as a passive instance shows it: every call of cluster-autoscaler's answers `not-leader` (gRPC
 * Unavailable) naming the acting instance, the runner's pass does nothing, and changes of the cluster are not
 * acted on. What only reports on memory (quarantine, poweredOutside, usage) still answers.
 */
export function whileActing(pool: Pool, leadership: Leadership): Pool {
  return poolThrough(
    (what) => {
      ensureActing(leadership, what);
      return pool;
    },
    () => (leadership.acting() ? pool : undefined),
    () => pool,
  );
}

/**
 * A Pool that hands each call on: cluster-autoscaler's to `forCa(what)` (which throws to refuse it), the runner's
 * work to `forWork()` and the reports on memory to `forReports()`; with no pool there, work is skipped and
 * reports are empty.
 */
export function poolThrough(forCa: (what: string) => Pool, forWork: () => Pool | undefined, forReports: () => Pool | undefined): Pool {
  return {
    nodeGroups: () => forCa("listing node groups").nodeGroups(),
    nodeGroupForNode: (node) => forCa("finding a node's group").nodeGroupForNode(node),
    targetSize: (id) => forCa("reading a target size").targetSize(id),
    increaseSize: async (id, delta, options) => forCa("increasing a group's size").increaseSize(id, delta, options),
    deleteNodes: async (id, nodes, options) => forCa("deleting nodes").deleteNodes(id, nodes, options),
    decreaseTargetSize: async (id, delta, options) => forCa("decreasing a target size").decreaseTargetSize(id, delta, options),
    instances: (id) => forCa("listing instances").instances(id),
    template: (id) => forCa("building a template node").template(id),
    gpuLabel: () => forCa("reading the GPU label").gpuLabel(),
    gpuTypes: () => forCa("listing GPU types").gpuTypes(),
    refresh: async (options) => forCa("refreshing").refresh(options),
    reconcile: async (options) => forWork()?.reconcile(options),
    clusterChanged: () => forWork()?.clusterChanged(),
    quarantine: () => forReports()?.quarantine() ?? [],
    poweredOutside: () => forReports()?.poweredOutside() ?? [],
    deviceMismatches: () => forReports()?.deviceMismatches() ?? [],
    usage: () => forReports()?.usage() ?? [],
  };
}
