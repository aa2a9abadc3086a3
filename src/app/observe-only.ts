// `serve --dry-run`: the write ports, wrapped so that they change nothing and tell what they would have done.
// Reads pass through. Every act that would change a plug or the cluster is told (a log line and an Event) and
// then refused as a failure of that act, so the domain goes on exactly as after a real failure: a scale-up
// fails towards cluster-autoscaler (it sees no instance that would never come, and backs the group off), a
// DeleteNodes fails before any power-off starts (CA takes its taint off again), a step of a power-off left by an
// earlier run fails and is retried. plugpool's own records are kept in memory only.
import type {
  ClusterView,
  CutGuard,
  Machine,
  NodeTeardown,
  PowerControl,
  PlugReading,
  PowerOnRecord,
  PowerRecords,
  PowerSwitch,
  SwitchOptions,
  QuarantineRecord,
} from "../domain/index.ts";
import { PlugpoolError, POWER_OFF_ANNOTATION } from "../domain/index.ts";

/** What a dry run would have done, on the Node (or machine) it concerns. */
export interface DryRunAction {
  readonly node: string;
  /** DryRunPowerOn, DryRunPlugOff, DryRunPowerOff or DryRunPowerOffStep. */
  readonly reason: string;
  readonly message: string;
}

export type Tell = (action: DryRunAction) => void;

const NOTHING_SENT = "nothing was sent (serve --dry-run)";
const NOTHING_CHANGED = "nothing was changed (serve --dry-run)";

/** Reads plugs; a switch-on or an allowed switch-off is told and refused. */
export function observeOnlyPowerSwitch(power: PowerSwitch, machines: readonly Machine[], tell: Tell): PowerSwitch {
  const byKey = new Map(machines.map((m) => [m.power.key, m.name]));
  const machineOf = (control: PowerControl): string => byKey.get(control.key) ?? control.label;
  return {
    read: (plug, options) => power.read(plug, options),
    turnOn(plug): Promise<PlugReading> {
      const machine = machineOf(plug);
      tell({
        node: machine,
        reason: "DryRunPowerOn",
        message: `would switch the plug of ${machine} on now; ${NOTHING_SENT}. Like a failed switch-on, this lets a scale-up try the next machine: of several told at once, the first is the one a real run would use`,
      });
      return Promise.reject(new PlugpoolError("unsafe", `dry run: the plug of ${machine} was not switched on`));
    },
    async turnOff(plug: PowerControl, mayCut: CutGuard, options: SwitchOptions): Promise<PlugReading> {
      const machine = machineOf(plug);
      // The check a real switch-off takes at the plug, so the dry run says whether the cut would have happened.
      if (!(await mayCut(options))) {
        throw new PlugpoolError("unsafe", `plug of ${machine}: the switch-off was refused at the plug by the safety check`);
      }
      tell({ node: machine, reason: "DryRunPlugOff", message: `would switch the plug of ${machine} off now (the check at the plug allowed it); ${NOTHING_SENT}` });
      throw new PlugpoolError("unsafe", `dry run: the plug of ${machine} was not switched off`);
    },
    async shutdown(control: PowerControl, mayShutDown: CutGuard, options: SwitchOptions): Promise<void> {
      const machine = machineOf(control);
      // The check a real shutdown takes at the device, so the dry run says whether it would have been asked.
      if (!(await mayShutDown(options))) {
        throw new PlugpoolError("unsafe", `${control.label}: the OS shutdown of ${machine} was refused at the device by the safety check`);
      }
      tell({ node: machine, reason: "DryRunPowerOffStep", message: `would ask ${control.label} to shut the OS of ${machine} down now (the check at the device allowed it); ${NOTHING_SENT}` });
      throw new PlugpoolError("unsafe", `dry run: ${machine} was not asked to shut down`);
    },
  };
}

/**
 * Starts no power-off: recording one on a Node is told as the power-off it would begin, and refused. The other
 * writes (only reached by a power-off recorded by an earlier run) are told and refused when they would change
 * something the view shows, and succeed when there is nothing to do.
 */
export function observeOnlyTeardown(view: ClusterView, tell: Tell): NodeTeardown {
  const refuse = (node: string, what: string): Promise<never> => {
    tell({ node, reason: "DryRunPowerOffStep", message: `would ${what} now; ${NOTHING_CHANGED}` });
    return Promise.reject(new PlugpoolError("cluster-refused", `dry run: did not ${what}`));
  };
  return {
    markPowerOff(nodeName) {
      tell({
        node: nodeName,
        reason: "DryRunPowerOff",
        message: `would start the power-off of node ${nodeName} now (shut its OS down, wait for NotReady and the grace, switch its plug off, delete the Node); ${NOTHING_CHANGED}, and cluster-autoscaler is told the deletion failed`,
      });
      return Promise.reject(new PlugpoolError("cluster-refused", `dry run: the power-off of node ${nodeName} was not started`));
    },
    clearPowerOffMark(nodeName) {
      const marked = view.nodeNamed(nodeName)?.annotations[POWER_OFF_ANNOTATION] !== undefined;
      return marked ? refuse(nodeName, `remove the power-off record from node ${nodeName}`) : Promise.resolve();
    },
    createPowerOffPod(machine, nodeName) {
      return refuse(nodeName, `create the power-off pod of ${machine.name} on node ${nodeName}`);
    },
    deletePowerOffPod(machine) {
      const pod = view.powerOffPod(machine.name);
      return pod === undefined ? Promise.resolve(true) : refuse(pod.nodeName, `delete the power-off pod of ${machine.name}`);
    },
    deleteNode(nodeName) {
      return view.nodeNamed(nodeName) === undefined ? Promise.resolve() : refuse(nodeName, `delete node ${nodeName}`);
    },
  };
}

/**
 * plugpool's records as stored on the cluster (read at start), with every change kept in memory instead: a dry
 * run leaves the stored records as it found them.
 */
export function observeOnlyRecords(stored: PowerRecords): PowerRecords {
  // null: ended or cleared during this run.
  const powerOns = new Map<string, PowerOnRecord | null>();
  const quarantines = new Map<string, QuarantineRecord | null>();
  const identities = new Map<string, string>();
  return {
    powerOn: (machine) => (powerOns.has(machine) ? (powerOns.get(machine) ?? undefined) : stored.powerOn(machine)),
    recordPowerOn(machine, record) {
      powerOns.set(machine, record);
      return Promise.resolve();
    },
    endPowerOn(machine) {
      powerOns.set(machine, null);
    },
    quarantine: (machine) => (quarantines.has(machine) ? (quarantines.get(machine) ?? undefined) : stored.quarantine(machine)),
    setQuarantine(machine, record) {
      quarantines.set(machine, record ?? null);
    },
    deviceIdentity: (machine) => identities.get(machine) ?? stored.deviceIdentity(machine),
    recordDeviceIdentity(machine, id) {
      identities.set(machine, id);
      return Promise.resolve();
    },
    // Nothing is written, so nothing waits to be.
    stored: () => Promise.resolve(),
  };
}
