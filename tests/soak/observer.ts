// The soak's independent observer. It knows nothing of plugpool's code: it sees the plugs (every request as it
// reaches a device, and the relays' state) and the cluster (Node and power-off pod watches as admin, plugpool's
// power-on records and its PoweredOutside Events), and records a violation whenever the outside world shows one
// of these:
// - a switch-off reached the plug of a machine whose Node was Ready and without CA's ToBeDeleted taint;
// - a switch-off reached the plug of a machine whose Node was NotReady and without that taint, other than the power
//   cycle of a machine plugpool halted: a power-off pod was seen on that same Node (same uid), the Node went NotReady
//   after the pod was created and stayed NotReady, and a switch-on reaches the plug within CYCLE_ON_MS;
// - a switch-off reached the plug of a machine that was on without a Node and without plugpool's record of
//   powering it on (powered outside plugpool: never plugpool's to cut);
// - a power-off pod was created on a Node without that taint;
// - a machine stayed on without a Node, without plugpool's record of powering it on and without a PoweredOutside
//   Event about it (out of everyone's view) for longer than OUT_OF_VIEW_MS;
// - a power-off (plugpool's mark on a Node, or its power-off pod on a Node still tainted) lasted longer than
//   STUCK_MS;
// - a machine stayed halted (its OS shut down) with its plug on for longer than STUCK_MS without a Stranded Event
//   about it (plugpool may leave a held machine halted, reported, until someone acts): nothing but a power cycle
//   boots it again.
// The time bounds (OUT_OF_VIEW_MS, STUCK_MS, CYCLE_ON_MS) count only time in which the plugpool cluster-autoscaler
// calls can act: not while it is frozen, nor while another instance holds plugpool's Lease (that one acts, but CA's
// Refresh never reaches it).
import { CoordinationV1Api, CoreV1Api, makeInformer, type CoreV1Event, type KubeConfig, type V1Node, type V1Pod } from "@kubernetes/client-node";
import type { CallRecord, EmulatedPlug } from "../harness/plug-emulator/index.ts";
import { CALLED_PLUGPOOL, GRACE_MS, NAMESPACE, NOT_READY_TIMEOUT_MS, PREFIX, RELAY } from "../harness/site/index.ts";

export const TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler";
export const POWER_OFF_MARK = "plugpool.io/power-off-started-at";
const RECORDS_CONFIGMAP = "plugpool-records";
const POWER_ON_KEY = "power-on.";

/**
 * How long a fresh change may take to reach the observer's watches, or a check right before an act may precede
 * it: a taint removed less than this before a switch-off or a pod creation is a race, not a violation.
 */
const SLACK_MS = 1_000;
/**
 * How long after plugpool's last sign of having powered a machine on (its record, read every second, or its
 * switch-on request) a switch-off is still taken for plugpool's own.
 */
const RECORD_SLACK_MS = 3_000;
/** Longest the switch-on of a power cycle may follow its switch-off ("at once", plus a dead plug's 30 s and retries). */
export const CYCLE_ON_MS = 60_000;
/** A request already through a relay when it is pointed elsewhere: it reaches its plug within this. */
const SWAP_SLACK_MS = 200;
/** How much older than the episode a PoweredOutside Event may look (its timestamps have whole seconds). */
const EVENT_SLACK_MS = 5_000;
/** How much earlier than the halt a Stranded Event about it may come (the report may precede the OS's halt). */
const STRANDED_SLACK_MS = 60_000;
/** Longest a machine may be on without a Node and out of everyone's view (plugpool reads plugs every CA loop). */
export const OUT_OF_VIEW_MS = 60_000;
/**
 * Longest a power-off may take: its own bounds, plus room for what the faults add (a plug dead for up to 30 s,
 * plugpool down for up to 10 s, an apiserver restart) and for the retries' back-off after them.
 */
export const STUCK_MS = NOT_READY_TIMEOUT_MS + GRACE_MS + 150_000;

export type ViolationKind =
  | "unsafe-switch-off"
  | "power-cycle-left-off"
  | "switch-off-powered-outside"
  | "power-off-pod-on-untainted-node"
  | "machine-out-of-view"
  | "power-off-stuck"
  | "halted-with-power-on"
  | "command-to-another-device";

export interface Violation {
  /** Wall-clock time it was seen (epoch ms). */
  readonly at: number;
  readonly kind: ViolationKind;
  readonly detail: string;
}

interface NodeState {
  readonly name: string;
  readonly uid: string;
  providerID: string;
  ready: boolean;
  tainted: boolean;
  /** Since when (epoch ms) the Node has been without CA's taint, as far as the observer knows. */
  untaintedSince: number;
  /** Since when plugpool's power-off mark has been on it; undefined without the mark. */
  markedSince: number | undefined;
  /** Since when (epoch ms) it has been NotReady without a break; undefined while Ready. */
  notReadySince: number | undefined;
  /** When the first power-off pod seen on this Node was created (epoch ms, rounded down to whole seconds). */
  shutdownPodCreated: number | undefined;
}

interface PodState {
  readonly name: string;
  readonly node: string;
  firstSeen: number;
}

export interface ObserverStats {
  /** turn_on requests that reached a plug whose relay was off. */
  readonly powerOns: number;
  /** turn_off requests that reached a plug whose relay was on. */
  readonly powerOffs: number;
  readonly powerOffPods: number;
  /** Times plugpool's Lease was seen taken by another process than its last holder, and of those, by the second plugpool. */
  readonly leaseHandovers: number;
  readonly secondTookLease: number;
}

export interface NodeInfo {
  readonly name: string;
  readonly ready: boolean;
  readonly tainted: boolean;
  readonly marked: boolean;
}

export interface Observer {
  /** Wired to every plug: called as a request reaches `machine`'s plug, before the plug acts on it. */
  onPlugRequest(machine: string, record: Readonly<CallRecord>): void;
  /** Starts the watches; the plugs are looked up through `plug`, and whether a machine's OS is halted through `halted`. */
  start(admin: KubeConfig, plug: (machine: string) => EmulatedPlug, halted: (machine: string) => boolean): Promise<void>;
  /**
   * The addresses configured for these machines' plugs reach each other's plug from now on (`true`), or their own
   * again (`false`): meanwhile no switch command may reach either plug, since each would reach the other machine's.
   */
  addressesSwapped(machines: readonly string[], swapped: boolean): void;
  /** The plugpool cluster-autoscaler calls is frozen from now on (`true`), or runs again (`false`). */
  plugpoolFrozen(frozen: boolean): void;
  /** The fault injector took the taint off `node`: known at once, before the watch reports it. */
  taintRemoved(node: string): void;
  /** The Nodes as the observer sees them now. */
  nodes(): readonly NodeInfo[];
  /** The machines a Node claims (by name or providerID). */
  claimed(machine: string): boolean;
  violations(): readonly Violation[];
  /** Things worth telling that are not violations. */
  notes(): readonly string[];
  stats(): ObserverStats;
  stop(): Promise<void>;
}

export function createObserver(machines: readonly string[], log: (message: string) => void): Observer {
  const nodes = new Map<string, NodeState>();
  const pods = new Map<string, PodState>();
  const violations: Violation[] = [];
  const notes: string[] = [];
  const reported = new Set<string>();
  let plugOf: ((machine: string) => EmulatedPlug) | undefined;
  let haltedOf: ((machine: string) => boolean) | undefined;
  /** Since when each machine has been halted with its plug on (moved by pauses), and since when truly (one violation per spell). */
  const haltedOnSince = new Map<string, number>();
  const haltedOnSpell = new Map<string, number>();
  let records = new Set<string>();
  /** When (epoch ms) plugpool last showed it had powered each machine on: its record seen, or its switch-on request. */
  const poweredByPlugpool = new Map<string, number>();
  /** The latest PoweredOutside Event time (epoch ms) per machine. */
  const poweredOutside = new Map<string, number>();
  /** The latest Stranded Event time (epoch ms) per machine. */
  const stranded = new Map<string, number>();
  /** The resourceVersion each PoweredOutside Event had when last seen, by uid. */
  const eventVersions = new Map<string, string>();
  /** Since when each machine has been on without a Node and without a power-on record. */
  const unseenSince = new Map<string, number>();
  /** When each machine's current spell out of view began, unmoved by pauses: one violation per spell. */
  const unseenSpell = new Map<string, number>();
  let stats = { powerOns: 0, powerOffs: 0, powerOffPods: 0, leaseHandovers: 0, secondTookLease: 0 };
  let lastHolder = "";
  /** When the switch-off of each machine's power cycle reached its plug, until a switch-on follows. */
  const cycleOffAt = new Map<string, number>();
  /** Since when (epoch ms) each machine's plug has been reached through another machine's address. */
  const swapped = new Map<string, number>();
  let stopped = false;
  const informers: { stop(): Promise<void> }[] = [];
  let ticker: NodeJS.Timeout | undefined;
  let ticking: Promise<void> = Promise.resolve();
  let frozen = false;
  let lastTick: number | undefined;

  const violation = (kind: ViolationKind, key: string, detail: string): void => {
    if (reported.has(`${kind}/${key}`)) return;
    reported.add(`${kind}/${key}`);
    violations.push({ at: Date.now(), kind, detail });
    log(`VIOLATION ${kind}: ${detail}`);
  };

  const claiming = (machine: string): NodeState[] =>
    [...nodes.values()].filter((n) => n.name === machine || n.providerID === PREFIX + machine);

  const describe = (n: NodeState, now: number): string =>
    `Node ${n.name} ${n.ready ? "Ready" : "NotReady"}, without ${TO_BE_DELETED} for ${((now - n.untaintedSince) / 1000).toFixed(1)} s`;

  function onPlugRequest(machine: string, record: Readonly<CallRecord>): void {
    try {
      checkPlugRequest(machine, record);
    } catch (error) {
      log(`observer failed on a request to ${machine}'s plug: ${error instanceof Error ? error.stack ?? error.message : String(error)}`);
    }
  }

  function checkPlugRequest(machine: string, record: Readonly<CallRecord>): void {
    const action = /^\/switch\/[^/?]+\/(turn_on|turn_off|toggle)(\?|$)/.exec(record.path)?.[1];
    if (action === undefined) return;
    const relayOn = plugOf?.(machine).state(RELAY);
    const now = Date.now();
    const swappedAt = swapped.get(machine);
    // A request already on its way when the addresses moved may still land: the relay drops what it carried.
    if (swappedAt !== undefined && now - swappedAt > SWAP_SLACK_MS) {
      violation("command-to-another-device", `${machine}/${now}`, `${record.method} ${record.path} reached ${machine}'s plug through another machine's address`);
    }
    if (action === "turn_on") {
      cycleOffAt.delete(machine);
      poweredByPlugpool.set(machine, now);
      if (relayOn === false) stats = { ...stats, powerOns: stats.powerOns + 1 };
      return;
    }
    if (relayOn === true) stats = { ...stats, powerOffs: stats.powerOffs + 1 };
    const nodesOfMachine = claiming(machine);
    if (relayOn === true && nodesOfMachine.length === 0 && now - (poweredByPlugpool.get(machine) ?? 0) > RECORD_SLACK_MS) {
      violation("switch-off-powered-outside", `${machine}/${now}`,
        `${record.method} ${record.path} reached ${machine}'s plug while it was on without a Node and without a power-on record`);
    }
    for (const n of nodesOfMachine) {
      if (n.tainted || now - n.untaintedSince <= SLACK_MS) continue;
      if (n.ready) {
        violation("unsafe-switch-off", `${machine}/${now}`, `${record.method} ${record.path} reached ${machine}'s plug while ${describe(n, now)}`);
      } else if (!haltedByPlugpool(n)) {
        violation("unsafe-switch-off", `${machine}/${now}`,
          `${record.method} ${record.path} reached ${machine}'s plug while ${describe(n, now)}, and not as the power cycle of a machine plugpool halted (${whyNotCycle(n)})`);
      } else if (relayOn === true) {
        cycleOffAt.set(machine, now);
        notes.push(`power cycle: a switch-off reached ${machine}'s plug while ${describe(n, now)}, NotReady since ${((n.notReadySince ?? now) - (n.shutdownPodCreated ?? now)) / 1000} s after its power-off pod`);
        log(`note: power cycle of ${machine}: ${describe(n, now)}`);
      }
    }
  }

  /**
   * Whether a NotReady Node's machine is one plugpool halted: a power-off pod was seen on this Node (this uid), and
   * the Node went NotReady after the pod was created and has stayed so.
   */
  const haltedByPlugpool = (n: NodeState): boolean =>
    n.shutdownPodCreated !== undefined && n.notReadySince !== undefined && n.notReadySince >= n.shutdownPodCreated;

  const whyNotCycle = (n: NodeState): string =>
    n.shutdownPodCreated === undefined ? "no power-off pod was seen on this Node" : "the Node was NotReady before its power-off pod";

  function onNode(node: V1Node): void {
    const name = node.metadata?.name ?? "";
    const uid = node.metadata?.uid ?? "";
    const now = Date.now();
    const ready = node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
    const tainted = node.spec?.taints?.some((t) => t.key === TO_BE_DELETED) === true;
    const marked = node.metadata?.annotations?.[POWER_OFF_MARK] !== undefined;
    const known = nodes.get(name);
    // A Node of the same name with another uid is another registration: nothing of the old one carries over.
    if (known?.uid !== uid) {
      nodes.set(name, {
        name, uid, providerID: node.spec?.providerID ?? "", ready, tainted, untaintedSince: now, markedSince: marked ? now : undefined,
        notReadySince: ready ? undefined : now, shutdownPodCreated: undefined,
      });
      return;
    }
    known.providerID = node.spec?.providerID ?? "";
    if (ready) known.notReadySince = undefined;
    else known.notReadySince ??= now;
    known.ready = ready;
    if (known.tainted && !tainted) known.untaintedSince = now;
    known.tainted = tainted;
    if (!marked) known.markedSince = undefined;
    else known.markedSince ??= now;
  }

  function onPod(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? "";
    if (pods.has(uid)) return;
    const name = pod.metadata?.name ?? "";
    const nodeName = pod.spec?.nodeName ?? "";
    pods.set(uid, { name, node: nodeName, firstSeen: Date.now() });
    stats = { ...stats, powerOffPods: stats.powerOffPods + 1 };
    // Watch events carry the JSON as sent (a string), list answers a Date.
    const stamp = pod.metadata?.creationTimestamp as Date | string | undefined;
    const created = stamp === undefined ? Date.now() : new Date(stamp).getTime();
    const node = nodes.get(nodeName);
    if (node !== undefined) node.shutdownPodCreated ??= created;
    // creationTimestamp has whole seconds, rounded down: the pod was created no earlier than `created`.
    if (node !== undefined && !node.tainted && created - node.untaintedSince > SLACK_MS) {
      violation("power-off-pod-on-untainted-node", uid, `power-off pod ${name} created on ${describe(node, created)}`);
    }
  }

  async function readRecords(core: CoreV1Api): Promise<void> {
    try {
      const map = await core.readNamespacedConfigMap({ namespace: NAMESPACE, name: RECORDS_CONFIGMAP });
      records = new Set(Object.keys(map.data ?? {}).filter((k) => k.startsWith(POWER_ON_KEY)).map((k) => k.slice(POWER_ON_KEY.length)));
      const now = Date.now();
      for (const machine of records) poweredByPlugpool.set(machine, now);
    } catch (error) {
      if ((error as { code?: number }).code === 404) records = new Set();
      // Otherwise (an apiserver restart) the last answer stands.
    }
  }

  /** Notes, per machine, when an Event of `reason` about it was last seen appearing or changing. */
  async function readReports(core: CoreV1Api, reason: string, seenAt: Map<string, number>): Promise<void> {
    let items: CoreV1Event[];
    try {
      ({ items } = await core.listEventForAllNamespaces({ fieldSelector: `reason=${reason}` }));
    } catch {
      return;
    }
    // An Event's times are written by plugpool on its own wall clock, which the clock-stepped fault moves: it is
    // timed by when the observer sees it appear or change, on the true clock (to within a tick).
    const now = Date.now();
    for (const event of items) {
      const uid = event.metadata.uid ?? "";
      const version = event.metadata.resourceVersion ?? "";
      if (eventVersions.get(uid) === version) continue;
      eventVersions.set(uid, version);
      for (const machine of machines) {
        const about = event.involvedObject.name === machine || new RegExp(`(^|[^\\w-])${machine}($|[^\\w-])`).test(event.message ?? "");
        if (about) seenAt.set(machine, now);
      }
    }
  }

  /**
   * Whether the plugpool CA calls cannot act now: frozen, or another instance holds plugpool's Lease (whose
   * handovers are counted on the way).
   */
  async function away(leases: CoordinationV1Api): Promise<boolean> {
    const lease = await leases.readNamespacedLease({ namespace: NAMESPACE, name: "plugpool" }).catch(() => undefined);
    const holder = lease?.spec?.holderIdentity ?? "";
    if (holder !== "" && holder !== lastHolder) {
      const second = !holder.startsWith(`${CALLED_PLUGPOOL}_`);
      if (lastHolder !== "") stats = { ...stats, leaseHandovers: stats.leaseHandovers + 1, secondTookLease: stats.secondTookLease + (second ? 1 : 0) };
      lastHolder = holder;
    }
    return frozen || (holder !== "" && !holder.startsWith(`${CALLED_PLUGPOOL}_`));
  }

  /** Moves every running bound's start `ms` later: time in which plugpool could not act does not count. */
  function pauseBounds(ms: number): void {
    for (const [machine, since] of unseenSince) unseenSince.set(machine, since + ms);
    for (const n of nodes.values()) if (n.markedSince !== undefined) n.markedSince += ms;
    for (const pod of pods.values()) pod.firstSeen += ms;
    for (const [machine, at] of cycleOffAt) cycleOffAt.set(machine, at + ms);
    for (const [machine, since] of haltedOnSince) haltedOnSince.set(machine, since + ms);
  }

  async function tick(core: CoreV1Api, leases: CoordinationV1Api): Promise<void> {
    const [isAway] = await Promise.all([away(leases), readRecords(core), readReports(core, "PoweredOutside", poweredOutside), readReports(core, "Stranded", stranded)]);
    const now = Date.now();
    if (isAway && lastTick !== undefined) pauseBounds(now - lastTick);
    lastTick = now;
    for (const machine of machines) {
      const on = plugOf?.(machine).state(RELAY) === true;
      const unseen = on && claiming(machine).length === 0 && !records.has(machine);
      if (!unseen) {
        unseenSince.delete(machine);
        unseenSpell.delete(machine);
        continue;
      }
      const since = unseenSince.get(machine) ?? now;
      unseenSince.set(machine, since);
      const spell = unseenSpell.get(machine) ?? now;
      unseenSpell.set(machine, spell);
      // A report counts from the spell's true start: `since` moves with every pause, and an Event seen right as the
      // spell began would otherwise fall out of the slack once plugpool was frozen for longer than it.
      const reportedAt = poweredOutside.get(machine) ?? 0;
      if (reportedAt < spell - EVENT_SLACK_MS && now - since > OUT_OF_VIEW_MS) {
        violation("machine-out-of-view", `${machine}/${String(spell)}`,
          `${machine} on for ${((now - since) / 1000).toFixed(0)} s without a Node, a power-on record or a PoweredOutside Event`);
      }
    }
    for (const machine of machines) {
      const halted = plugOf?.(machine).state(RELAY) === true && haltedOf?.(machine) === true;
      if (!halted) {
        haltedOnSince.delete(machine);
        haltedOnSpell.delete(machine);
        continue;
      }
      const since = haltedOnSince.get(machine) ?? now;
      haltedOnSince.set(machine, since);
      const spell = haltedOnSpell.get(machine) ?? now;
      haltedOnSpell.set(machine, spell);
      // plugpool may judge and report the machine before its OS has finished halting.
      const reported = (stranded.get(machine) ?? 0) >= spell - STRANDED_SLACK_MS;
      if (!reported && now - since > STUCK_MS) {
        violation("halted-with-power-on", `${machine}/${String(spell)}`, `${machine} halted with its plug on for ${((now - since) / 1000).toFixed(0)} s, and no Stranded Event about it`);
      }
    }
    for (const [machine, at] of cycleOffAt) {
      if (now - at > CYCLE_ON_MS) {
        violation("power-cycle-left-off", `${machine}/${String(at)}`, `${machine}'s plug was switched off as a power cycle ${((now - at) / 1000).toFixed(0)} s ago and not on again`);
        cycleOffAt.delete(machine);
      }
    }
    for (const n of nodes.values()) {
      if (n.markedSince !== undefined && now - n.markedSince > STUCK_MS) {
        violation("power-off-stuck", `mark/${n.name}/${n.markedSince}`, `Node ${n.name} carries ${POWER_OFF_MARK} for ${((now - n.markedSince) / 1000).toFixed(0)} s`);
      }
    }
    for (const [uid, pod] of pods) {
      const node = nodes.get(pod.node);
      if (node?.tainted === true && now - pod.firstSeen > STUCK_MS) {
        violation("power-off-stuck", `pod/${uid}`, `power-off pod ${pod.name} on ${pod.node} (still tainted) for ${((now - pod.firstSeen) / 1000).toFixed(0)} s`);
      }
    }
  }

  /** An informer that starts again after an error (an apiserver restart ends its watch with one). */
  async function inform<T extends V1Node | V1Pod>(
    admin: KubeConfig,
    path: string,
    list: () => Promise<{ items: T[] }>,
    onChange: (object: T) => void,
    onDelete: (object: T) => void,
  ): Promise<void> {
    const informer = makeInformer<T>(admin, path, list);
    // A mistake of the observer's must not end the soak: it is told, and the watch goes on.
    const guarded = (handle: (object: T) => void) => (object: T): void => {
      try {
        handle(object);
      } catch (error) {
        log(`observer failed on a ${path} event: ${error instanceof Error ? error.stack ?? error.message : String(error)}`);
      }
    };
    informer.on("add", guarded(onChange));
    informer.on("update", guarded(onChange));
    informer.on("delete", guarded(onDelete));
    const restart = (): void => {
      if (stopped) return;
      setTimeout(() => { informer.start().catch(restart); }, 1000);
    };
    informer.on("error", restart);
    informers.push(informer);
    await informer.start();
  }

  return {
    onPlugRequest,
    addressesSwapped(names, on) {
      for (const name of names) {
        if (on) swapped.set(name, Date.now());
        else swapped.delete(name);
      }
    },
    start: async (admin, plug, halted) => {
      plugOf = plug;
      haltedOf = halted;
      const core = admin.makeApiClient(CoreV1Api);
      const leases = admin.makeApiClient(CoordinationV1Api);
      await inform<V1Node>(admin, "/api/v1/nodes", () => core.listNode(), onNode, (n) => { nodes.delete(n.metadata?.name ?? ""); });
      await inform<V1Pod>(admin, `/api/v1/namespaces/${NAMESPACE}/pods`, () => core.listNamespacedPod({ namespace: NAMESPACE }),
        onPod, (p) => { pods.delete(p.metadata?.uid ?? ""); });
      ticker = setInterval(() => {
        ticking = ticking.then(() => tick(core, leases)).catch((error: unknown) => { log(`observer tick failed: ${String(error)}`); });
      }, 1000);
    },
    plugpoolFrozen: (on) => {
      frozen = on;
    },
    taintRemoved: (name) => {
      const n = nodes.get(name);
      if (n !== undefined && n.tainted) {
        n.tainted = false;
        n.untaintedSince = Date.now();
      }
    },
    nodes: () => [...nodes.values()].map((n) => ({ name: n.name, ready: n.ready, tainted: n.tainted, marked: n.markedSince !== undefined })),
    claimed: (machine) => claiming(machine).length > 0,
    violations: () => violations,
    notes: () => notes,
    stats: () => stats,
    stop: async () => {
      stopped = true;
      clearInterval(ticker);
      await ticking;
      for (const informer of informers) await informer.stop();
    },
  };
}
