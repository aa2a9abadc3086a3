// The rule that guards every power cut (SPEC §9.1), as a verdict rather than an exception: a refusal is an
// expected outcome that callers report and act on.
import type { ClusterView } from "./ports.ts";
import type { Machine } from "./model.ts";
import type { SafetyRule } from "./events.ts";
import { hasDeletionTaint, hasHoldAnnotation, safetyNodes } from "./matching.ts";

/** Whether an action may go ahead, and if not, which rule refused it and why. */
export type Verdict =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly rule: SafetyRule; readonly detail: string };

/**
 * May the machine's plug be switched off now? Refused when the machine is held (config or annotation), or
 * when any Node that may be it (matched by providerID, or carrying its name whatever the providerID) lacks
 * cluster-autoscaler's ToBeDeleted taint. Reads the ClusterView as it is at this moment: call it
 * immediately before every turnOff, with nothing awaited in between.
 */
export function mayCutPower(machine: Machine, cluster: ClusterView, providerIDPrefix: string): Verdict {
  if (machine.hold) return { allowed: false, rule: "held", detail: `${machine.name} is held in the configuration` };
  const nodes = safetyNodes(cluster, providerIDPrefix, machine);
  const held = nodes.find(hasHoldAnnotation);
  if (held !== undefined) {
    return { allowed: false, rule: "held", detail: `node ${held.name} carries the hold annotation` };
  }
  const untainted = nodes.find((n) => !hasDeletionTaint(n));
  if (untainted !== undefined) {
    return {
      allowed: false,
      rule: "registered-without-taint",
      detail: `node ${untainted.name}${untainted.name === machine.name ? "" : ` (machine ${machine.name})`} is registered without the ToBeDeletedByClusterAutoscaler taint`,
    };
  }
  return { allowed: true };
}
