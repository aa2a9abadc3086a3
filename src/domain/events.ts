// Outcomes the domain reports. The domain does not log: adapters turn these into Kubernetes Events on the
// Node, metrics and structured logs.

/** The named steps of a power-off, in the order they run (power-off-steps.ts gives each its work). */
export const POWER_OFF_STEP_NAMES = ["check-taint", "power-off-pod", "await-not-ready", "grace", "plug-off", "remove-pod", "delete-node"] as const;

export type PowerOffStep = (typeof POWER_OFF_STEP_NAMES)[number];

/**
 * Which safety rule refused an action: a Node claims the machine without the taint; it is held; the group would
 * go below its minimum; the plug is not configured; the cluster view is not known to be current (or the Nodes
 * could not be read fresh); the machine was switched on by someone other than plugpool; the drained Node vanished
 * before the cut.
 */
export type SafetyRule =
  | "registered-without-taint"
  | "held"
  | "min-size"
  | "unconfigured-plug"
  | "view-not-current"
  | "powered-outside"
  | "node-vanished"
  | "node-ready"
  | "device-mismatch";

/** Everything the domain reports, as plain data; one variant per kind of outcome. */
export type PoolEvent =
  | {
      readonly type: "powered-on";
      readonly machine: string;
      readonly group: string;
      /** False when the command may have reached the plug but its answer was lost: counted as switched on. */
      readonly confirmed: boolean;
    }
  | { readonly type: "power-on-failed"; readonly machine: string; readonly group: string; readonly error: string }
  | {
      /** Chosen by IncreaseSize but held back by the inrush limit: a creating instance, switched on in turn. */
      readonly type: "power-on-queued";
      readonly machine: string;
      readonly group: string;
    }
  | {
      /** The plug was found off under a Node that should be running and was switched back on (never cut). */
      readonly type: "power-restored";
      readonly machine: string;
      readonly group: string;
      readonly node: string;
    }
  | {
      /**
       * A machine plugpool switched on for a scale-up has a Ready Node: `durationMs` from the plug-on to the
       * Node's Ready condition turning True (as the Node records it).
       */
      readonly type: "booted";
      readonly machine: string;
      readonly group: string;
      readonly node: string;
      readonly durationMs: number;
    }
  | {
      /** A boot failed: the machine is left out of scale-ups until `until` (epoch ms). */
      readonly type: "quarantined";
      readonly machine: string;
      readonly group: string;
      readonly until: number;
      /** Failed boots in a row, this one included. */
      readonly failures: number;
      readonly reason: string;
    }
  | { readonly type: "power-off-started"; readonly machine: string; readonly node: string; readonly resumed: boolean }
  | {
      readonly type: "power-off-step";
      readonly machine: string;
      readonly step: PowerOffStep;
      readonly outcome: "done" | "waiting" | "failed";
      readonly detail: string;
      /** Time since the step was first entered, when it is done. */
      readonly durationMs?: number;
    }
  | {
      readonly type: "plug-off";
      readonly machine: string;
      /** "cycle": the off of a halted machine's power cycle, switched on again at once. */
      readonly reason: "power-off" | "unregistered" | "cycle";
      /** The draw measured just before the cut, when the plug has a sensor. */
      readonly watts?: number;
      /** Why the grace ended: full wait, or the sensor saw standby. */
      readonly graceEnded?: "elapsed" | "standby";
    }
  | { readonly type: "node-deleted"; readonly machine: string; readonly node: string }
  | { readonly type: "power-off-finished"; readonly machine: string; readonly durationMs: number }
  | { readonly type: "power-off-aborted"; readonly machine: string; readonly reason: string }
  | { readonly type: "refused"; readonly machine: string; readonly rule: SafetyRule; readonly detail: string }
  | { readonly type: "plug-read-failed"; readonly machine: string; readonly error: string }
  | {
      /** A Node named like a machine carries a providerID of another form: not matched (logged once per change). */
      readonly type: "provider-id-mismatch";
      readonly machine: string;
      readonly providerID: string;
      readonly expected: string;
    }
  | {
      /** Power found in a state nobody asked for; reported, never "corrected" by cutting power. */
      readonly type: "unexpected-power";
      readonly machine: string;
      readonly detail: string;
    }
  | {
      /**
       * A plug found on with no Node and no record of plugpool switching it on: someone powered the machine (or
       * its Node registered under another name). Left out of cluster-autoscaler's view and never cut.
       */
      readonly type: "powered-outside";
      readonly machine: string;
      readonly detail: string;
    }
  | {
      /** More than one Node claims the machine (same providerID twice, or one by providerID and one by name). */
      readonly type: "duplicate-nodes";
      readonly machine: string;
      readonly nodes: readonly string[];
    }
  | {
      /**
       * A machine whose OS plugpool asked to shut down, and whose power-off was then called off, had halted: it was
       * switched on again (a control that shuts down, e.g. a BMC), or its plug power-cycled (off, then on at once).
       */
      readonly type: "revived";
      readonly machine: string;
      readonly node: string;
      readonly how: "power-on" | "power-cycle";
    }
  | {
      /**
       * A machine whose OS plugpool asked to shut down, and whose power-off was then called off, has halted with
       * its power on and is not brought back (held, or its Node is no longer the one shut down): someone must act.
       */
      readonly type: "stranded";
      readonly machine: string;
      readonly node: string;
      readonly detail: string;
    }
  | {
      /** The node stayed Ready through the whole shutdown timeout and the configuration asks for a cut anyway. */
      readonly type: "hard-cut";
      readonly machine: string;
      readonly node: string;
      readonly detail: string;
    }
  | {
      /**
       * The machine's power device answered as another device right before a switch command: nothing was sent and
       * the machine is held until an operator pins the identity its device should answer with.
       */
      readonly type: "device-mismatch";
      readonly machine: string;
      readonly expected: string;
      readonly seen: string;
    }
  | {
      /** First contact with the machine's power device: its identity is stored, and every later command checks it. */
      readonly type: "device-learned";
      readonly machine: string;
      readonly identity: string;
    }
  | {
      /**
       * Met for the first time, the machine's power device answers as the device of `other`: nothing was sent and
       * the machine is held (two devices with one name cannot be told apart; give each its own and pin it).
       */
      readonly type: "device-duplicate";
      readonly machine: string;
      readonly identity: string;
      readonly other: string;
    }
  | {
      /** The identity of a first contact could not be stored: nothing was sent (a restart could not confirm it). */
      readonly type: "device-not-recorded";
      readonly machine: string;
      readonly identity: string;
      readonly error: string;
    }
  | {
      /** The machine's power device restarted since plugpool last heard it (its uptime went back). */
      readonly type: "device-restarted";
      readonly machine: string;
      readonly uptimeSeconds: number;
    }
  | {
      /**
       * Machines of one group publish different DRA devices; the template uses those of `machine` (reported
       * once per change). CA assumes the machines of a group are alike.
       */
      readonly type: "template-slices-differ";
      readonly group: string;
      readonly machine: string;
      readonly differing: readonly string[];
      readonly detail: string;
    };
