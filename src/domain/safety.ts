// The rules that guard every irreversible act (a power-off pod, a plug switched off), as verdicts rather than
// exceptions: a refusal is an expected outcome that callers report and act on.
import type { CallOptions, ClusterView } from "./ports.ts";
import type { Machine, NodeView } from "./model.ts";
import type { SafetyRule } from "./events.ts";
import type { PoolContext } from "./context.ts";
import type { PowerOffJob } from "./power-off-job.ts";
import { shutdownNodeNotReady, shutdownNodeRanAgain } from "./power-off-job.ts";
import { claimsNoMachine, hasDeletionTaint, hasHoldAnnotation, instanceId, nodesOf, safetyNodes } from "./matching.ts";
import { powerOffOf, powerOnLicence, stateOf } from "./lifecycle.ts";
import { messageOf } from "./errors.ts";

/** Whether an action may go ahead, and if not, which rule refused it and why. */
export type Verdict =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly rule: SafetyRule; readonly detail: string };

const ALLOWED: Verdict = { allowed: true };

/**
 * May the machine be shut down and its plug switched off, given the Nodes that claim it? Refused when the machine
 * is held (config or annotation on any of them), or when any of them lacks cluster-autoscaler's ToBeDeleted taint.
 */
export function cutVerdict(machine: Machine, nodes: readonly NodeView[]): Verdict {
  if (machine.hold) return { allowed: false, rule: "held", detail: `${machine.name} is held in the configuration` };
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
  return ALLOWED;
}

/**
 * May the machine's plug be switched off now, as the ClusterView shows it? Every Node that may be the machine
 * (matched by providerID, or carrying its name whatever the providerID) must carry the ToBeDeleted taint, and
 * nothing may hold it. A first check: the act itself is guarded again by `freshVerdict` at the last moment.
 */
export function mayCutPower(machine: Machine, cluster: ClusterView, providerIDPrefix: string): Verdict {
  return cutVerdict(machine, safetyNodes(cluster, providerIDPrefix, machine));
}

/**
 * What a cut is for: the end of a power-off (the machine's Nodes are drained), a machine that has no Node, or the
 * off of a power cycle that brings back a machine halted by a power-off that was called off (revival.ts).
 */
export type CutKind = "power-off" | "unregistered" | "cycle";

/**
 * The verdict taken at the last moment before an irreversible act: the cluster view must be current, and the
 * Nodes that claim the machine are read fresh from the apiserver (and those of the view are honoured too, so a
 * lagging view can only add refusals). A power-off's cut, and its OS shutdown before it (`shutdown`), need every
 * claiming Node to allow it, and the cut no Node Ready again after the shutdown; an unregistered cut
 * needs no Node at all, plugpool's own record of the power-on (a machine powered on by anyone else is never
 * cut) and no sign it runs under a Node of another name (`unregisteredVerdict`). `read` is told the Nodes read fresh.
 */
export async function freshVerdict(
  ctx: PoolContext,
  machine: Machine,
  kind: CutKind | "shutdown",
  options?: CallOptions,
  read?: (fresh: readonly NodeView[]) => void,
): Promise<Verdict> {
  if (!ctx.deps.cluster.current()) {
    return { allowed: false, rule: "view-not-current", detail: "the cluster view is not known to be current" };
  }
  let fresh: readonly NodeView[];
  try {
    fresh = await ctx.deps.lookup.nodesClaiming(machine.name, instanceId(ctx.config.providerIDPrefix, machine), options);
  } catch (e) {
    return { allowed: false, rule: "view-not-current", detail: `the Nodes of ${machine.name} could not be read: ${messageOf(e)}` };
  }
  read?.(fresh);
  const nodes = [...fresh, ...nodesOf(ctx, machine).filter((v) => !fresh.some((f) => f.name === v.name))];
  if (kind === "cycle") return cycleVerdict(ctx, machine, fresh, nodes);
  if (kind !== "unregistered") {
    // A drained Node that vanished is no evidence the OS is down (it may have come back Ready just before): only a
    // power sensor at standby vouches for a cut without it. Gone from the apiserver is gone, whatever a lagging
    // view still shows.
    const job = powerOffOf(ctx, machine);
    if (fresh.length === 0 && job !== undefined && job.node !== "" && job.facts.standbyReached === undefined) {
      return { allowed: false, rule: "node-vanished", detail: `node ${job.node} vanished before the cut; no sign ${machine.name} is down` };
    }
    // Past its shutdown, a Node Ready again is an OS that did not go down (the pod never ran, the machine came
    // back): only a hard cut the configuration asked for goes ahead. (A Node that still shows Ready after the
    // plug was read off is settled by the power-off before it comes here.)
    const ready = kind === "shutdown" || job?.facts.notReady === undefined ? undefined : nodes.find((n) => n.ready);
    if (ready !== undefined && job?.facts.hardCut === undefined) {
      return { allowed: false, rule: "node-ready", detail: `node ${ready.name} is Ready again; ${machine.name} did not shut down` };
    }
    return cutVerdict(machine, nodes);
  }
  return unregisteredVerdict(ctx, machine, nodes);
}

/** A Node condition's time has whole seconds: it may read up to this much before the moment it names. */
export const CONDITION_TIME_RESOLUTION_MS = 1000;

/**
 * Whether `node`, NotReady now, went NotReady after the job asked for its OS shutdown. Told from the Node as seen
 * when asked, never by setting its condition's time (the control plane's or the node's clock) against the time of
 * the request (plugpool's clock, which may be set apart by minutes): Ready then, any NotReady now came later;
 * NotReady then, none did (a NotReady of another moment had a Ready between, and its OS ran). For a request whose
 * Node was not seen (a pod an earlier run created) the two times are all there is.
 */
export function notReadySinceRequest(job: PowerOffJob, node: NodeView, asked: number): boolean {
  const then = job.shutdownNodeReady;
  if (then === undefined) return (node.readyChangedAt ?? Number.NEGATIVE_INFINITY) >= asked - CONDITION_TIME_RESOLUTION_MS;
  return then.ready && node.readyChangedAt !== then.changedAt;
}

/**
 * Notes what the Node whose OS the job asked to shut down shows now. A halted machine's Node goes NotReady once and
 * stays so: seen Ready after a NotReady, or NotReady since another moment than when first seen (Ready in between,
 * unseen), its OS ran after the request, and no later NotReady is that shutdown's doing.
 */
export function watchShutdownNode(job: PowerOffJob, nodes: readonly NodeView[], asked: number): void {
  const node = nodes.find((n) => n.uid === job.shutdownNodeUid);
  const seen = job.shutdownNodeSeen;
  if (node === undefined || seen.readyAgain) return;
  if (node.ready) {
    if (seen.notReadyAt !== undefined) shutdownNodeRanAgain(job);
    return;
  }
  if (!notReadySinceRequest(job, node, asked)) return;
  const since = node.readyChangedAt ?? Number.NEGATIVE_INFINITY;
  if (seen.notReadyAt === undefined) shutdownNodeNotReady(job, since);
  else if (since !== seen.notReadyAt) shutdownNodeRanAgain(job);
}

/**
 * The off of a power cycle, the one cut of a machine whose Node has no ToBeDeleted taint: only while nothing holds
 * the machine, plugpool itself asked for its OS shutdown (this job), and every Node that claims it is the Node that
 * was shut down (same uid), NotReady since after the request.
 */
function cycleVerdict(ctx: PoolContext, machine: Machine, fresh: readonly NodeView[], nodes: readonly NodeView[]): Verdict {
  const held = cutVerdict(machine, nodes);
  if (!held.allowed && held.rule === "held") return held;
  const job = powerOffOf(ctx, machine);
  const asked = job?.facts.shutdownRequested;
  if (asked === undefined || job?.shutdownNodeUid === undefined) {
    return { allowed: false, rule: "registered-without-taint", detail: `plugpool did not ask for the OS shutdown of ${machine.name}` };
  }
  if (fresh.length === 0) return { allowed: false, rule: "node-vanished", detail: `the Node of ${machine.name} vanished; no sign it is halted` };
  const ready = nodes.find((n) => n.ready);
  if (ready !== undefined) return { allowed: false, rule: "node-ready", detail: `node ${ready.name} is Ready; ${machine.name} runs` };
  watchShutdownNode(job, fresh, asked);
  if (job.shutdownNodeSeen.readyAgain) {
    return { allowed: false, rule: "node-ready", detail: `node ${job.node} was Ready again after plugpool asked for the shutdown; ${machine.name} ran on` };
  }
  const other = nodes.find((n) => n.uid !== job.shutdownNodeUid || !notReadySinceRequest(job, n, asked));
  if (other !== undefined) {
    return {
      allowed: false,
      rule: "registered-without-taint",
      detail: `node ${other.name} is not the Node whose OS plugpool shut down, NotReady ever since; ${machine.name} keeps its power`,
    };
  }
  return ALLOWED;
}

/**
 * A Node created up to this long before a power-on may still be its machine's: the apiserver's clock is not
 * plugpool's, and a creation time has whole seconds.
 */
const CREATION_SKEW_MS = 60_000;

/**
 * The cut of a machine that has no Node: plugpool's own power-on record must stand, and nothing may suggest the
 * machine runs under a Node of another name: with a power sensor, a draw above standby (or none); without one, a
 * Node that claims no machine and was created after the power-on (a hostname typo, a reinstalled OS).
 */
function unregisteredVerdict(ctx: PoolContext, machine: Machine, nodes: readonly NodeView[]): Verdict {
  if (machine.hold) return { allowed: false, rule: "held", detail: `${machine.name} is held in the configuration` };
  const node = nodes[0];
  if (node !== undefined) {
    return { allowed: false, rule: "registered-without-taint", detail: `${machine.name} registered meanwhile (node ${node.name}) and keeps its power` };
  }
  const licence = powerOnLicence(ctx, machine);
  if (licence === undefined) {
    return { allowed: false, rule: "powered-outside", detail: `${machine.name} was not switched on by plugpool and keeps its power` };
  }
  // A machine drawing more than standby may be running under a Node of another name: never cut it blind, nor
  // when its sensor gave no draw (it failed, or a switch's answer carried none).
  const watts = stateOf(ctx, machine).power.watts;
  if (machine.power.measuresWatts && (watts === undefined || watts > ctx.config.powerOff.standbyWatts)) {
    const draw = watts === undefined ? "'s draw is not known (its power sensor gave none)" : ` draws ${watts} W`;
    return {
      allowed: false,
      rule: "powered-outside",
      detail: `${machine.name}${draw} with no Node (it may run under another name) and keeps its power`,
    };
  }
  if (machine.power.measuresWatts) return ALLOWED;
  const stranger = strangerSince(ctx, licence.at);
  if (stranger !== undefined) {
    return {
      allowed: false,
      rule: "powered-outside",
      detail: `${machine.name} may run as node ${stranger.name}, which claims no machine and registered after plugpool switched it on; it keeps its power`,
    };
  }
  return ALLOWED;
}

/** A Node, Ready or not, that claims no configured machine and was created after `at`. */
function strangerSince(ctx: PoolContext, at: number): NodeView | undefined {
  const { cluster } = ctx.deps;
  const candidates = cluster.nodesCreatedAfter(at - CREATION_SKEW_MS);
  return candidates.find((n) => claimsNoMachine(n, ctx.machines, ctx.config.providerIDPrefix));
}

/**
 * A refusal that only says "not now": the cut is tried again later rather than given up. A Node Ready again is
 * one: the power-off goes back to waiting for the shutdown, as when its step sees it first.
 */
export function isTransient(verdict: Verdict): boolean {
  return !verdict.allowed && (verdict.rule === "view-not-current" || verdict.rule === "node-ready");
}
