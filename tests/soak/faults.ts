// The soak's faults, one at a time at random: plugs that die, slow down or flap; plugpool killed and restarted; the
// apiserver restarted; and an operator's hand: a machine switched on at its plug, CA's taint removed from a node
// being powered off, a running machine's Node deleted (its kubelet restarted half a minute to two minutes later);
// and a router's hand: two plugs' addresses reaching each other's plug for a while; a second plugpool started
// beside the first (a rolling update, a second replica) and ended; the plugpool cluster-autoscaler calls frozen
// (SIGSTOP) past its Lease; and a plugpool's wall clock stepped either way.
import { setTimeout as sleep } from "node:timers/promises";
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import type { Observer } from "./observer.ts";
import { TO_BE_DELETED } from "./observer.ts";
import type { Random } from "./prng.ts";
import { swap } from "../harness/lease.ts";
import { RELAY, type Site } from "../harness/site/index.ts";

export const FAULT_KINDS = [
  "plug-dead",
  "plug-slow",
  "plug-flapping",
  "plugpool-killed",
  "apiserver-restarted",
  "powered-on-by-hand",
  "taint-removed-by-hand",
  "node-deleted-by-hand",
  "addresses-swapped",
  "second-plugpool",
  "plugpool-frozen",
  "clock-stepped",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
/** How long an armed taint removal waits for a power-off to interrupt. */
const TAINT_REMOVAL_WAIT_MS = 90_000;
/** plugpool's Lease (client-go's default duration): a freeze longer than this lets another instance take over. */
const LEASE_MS = 15_000;
/** A wall clock is never stepped further than this from the true time. */
const MAX_CLOCK_OFFSET_MS = 15 * 60_000;

export interface Faults {
  /** Injects one fault chosen at random (or arms it); resolves with what was done, or why nothing was. */
  inject(): Promise<string>;
  /** Faults injected so far, by kind. */
  counts(): Readonly<Record<FaultKind, number>>;
  /** Whether plugpool is down on purpose (killed, not yet restarted). */
  plugpoolDown(): boolean;
  /** Ends every fault still in effect: plugs healed, plugpool running, deleted Nodes' kubelets restarted. */
  end(): Promise<void>;
}

interface Pending {
  readonly timer: NodeJS.Timeout;
  readonly finish: () => Promise<void>;
}

export function createFaults(site: Site<"process">, observer: Observer, random: Random, log: (message: string) => void): Faults {
  const core = site.admin.makeApiClient(CoreV1Api);
  const counts = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  /** Plugs with a fault in effect: one fault per plug at a time. */
  const busy = new Set<string>();
  const pending = new Set<Pending>();
  let plugpoolDown = false;
  /** The plugpool CA calls is frozen: it is not killed meanwhile (its thaw would reach the next process). */
  let frozen = false;
  let secondRunning = false;
  let restarting = false;
  let armed: Promise<void> | undefined;
  let ending = false;

  const count = (kind: FaultKind, what: string): string => {
    counts[kind] += 1;
    return `${kind}: ${what}`;
  };

  /** Runs `finish` after `ms`, or at once when the soak ends. */
  const later = (ms: number, finish: () => Promise<void>): void => {
    const entry: Pending = {
      timer: setTimeout(() => {
        pending.delete(entry);
        finish().catch((error: unknown) => { log(`fault end failed: ${String(error)}`); });
      }, ms),
      finish,
    };
    pending.add(entry);
  };

  const freePlugs = (): string[] => site.machineNames.filter((m) => !busy.has(m));

  async function plugFault(kind: "plug-dead" | "plug-slow" | "plug-flapping"): Promise<string> {
    const free = freePlugs();
    if (free.length === 0) return `${kind}: every plug already has a fault`;
    const machine = random.pick(free);
    const plug = site.plug(machine);
    let what: string;
    let ms: number;
    if (kind === "plug-dead") {
      const silent = random.chance(0.5);
      ms = random.int(10_000, 30_000);
      await plug.inject(silent ? { kind: "timeout" } : { kind: "down" });
      what = `${machine}'s plug ${silent ? "never answers" : "refuses connections"} for ${(ms / 1000).toFixed(1)} s`;
    } else if (kind === "plug-slow") {
      const delay = random.int(300, 1500);
      ms = random.int(10_000, 30_000);
      await plug.inject({ kind: "slow", ms: delay });
      what = `${machine}'s plug answers after ${delay} ms for ${(ms / 1000).toFixed(1)} s`;
    } else {
      const every = random.int(1500, 4000);
      ms = random.int(4_000, 12_000);
      await plug.inject({ kind: "flap", everyMs: every });
      what = `${machine}'s relay flips by itself every ${every} ms for ${(ms / 1000).toFixed(1)} s`;
    }
    busy.add(machine);
    later(ms, async () => {
      await plug.clearFaults();
      busy.delete(machine);
      log(`${kind} over: ${machine}'s plug healthy (relay ${plug.state(RELAY) ? "on" : "off"})`);
    });
    return count(kind, what);
  }

  async function killPlugpool(): Promise<string> {
    if (plugpoolDown) return "plugpool-killed: already down";
    if (frozen) return "plugpool-killed: frozen at the moment";
    const downMs = random.int(1000, 10_000);
    plugpoolDown = true;
    await site.plugpool.kill();
    later(downMs, startPlugpool);
    return count("plugpool-killed", `SIGKILL, restarted after ${(downMs / 1000).toFixed(1)} s`);
  }

  async function startPlugpool(): Promise<void> {
    try {
      await site.plugpool.start();
      log("plugpool restarted and ready");
    } finally {
      // Started or not, it is no longer down on purpose: the soak's supervisor takes over if it is not running.
      plugpoolDown = false;
    }
  }

  async function restartApiServer(): Promise<string> {
    if (restarting) return "apiserver-restarted: already restarting";
    restarting = true;
    try {
      const started = performance.now();
      await site.plane.restartApiServer();
      return count("apiserver-restarted", `back after ${((performance.now() - started) / 1000).toFixed(1)} s`);
    } finally {
      restarting = false;
    }
  }

  function powerOnByHand(): string {
    const candidates = freePlugs().filter((m) => !site.plug(m).state(RELAY) && !observer.claimed(m));
    if (candidates.length === 0) return "powered-on-by-hand: no machine is off";
    const machine = random.pick(candidates);
    site.plug(machine).setState(RELAY, true);
    return count("powered-on-by-hand", `${machine}'s plug switched on at the device`);
  }

  /** Takes CA's taint off the Node as an operator would; false when it no longer has it (or is gone). */
  async function removeTaint(node: string): Promise<boolean> {
    for (let attempt = 1; attempt <= 5; attempt++) {
      const current = await core.readNode({ name: node }).catch((error: unknown) => {
        // Powered off and deleted meanwhile: nothing left to remove.
        if (error instanceof ApiException && error.code === 404) return undefined;
        throw error;
      });
      if (current === undefined) return false;
      const taints = current.spec?.taints ?? [];
      if (!taints.some((t) => t.key === TO_BE_DELETED)) return false;
      // The resourceVersion makes the merge patch fail on a conflict rather than undo another change.
      const body = { metadata: { resourceVersion: current.metadata?.resourceVersion }, spec: { taints: taints.filter((t) => t.key !== TO_BE_DELETED) } };
      try {
        await core.patchNode({ name: node, body }, MERGE);
        observer.taintRemoved(node);
        return true;
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 409)) throw error;
      }
    }
    return false;
  }

  function armTaintRemoval(): string {
    if (armed !== undefined) return "taint-removed-by-hand: already waiting for a power-off";
    const delayMs = random.int(0, 2500);
    const deadline = performance.now() + TAINT_REMOVAL_WAIT_MS;
    armed = (async () => {
      while (!ending && performance.now() < deadline) {
        const target = observer.nodes().find((n) => n.tainted && n.marked);
        if (target !== undefined) {
          await sleep(delayMs);
          if (await removeTaint(target.name)) {
            log(count("taint-removed-by-hand", `${TO_BE_DELETED} removed from ${target.name} ${delayMs} ms into its power-off`));
          } else {
            log(`taint-removed-by-hand: ${target.name} lost its taint before the operator got to it`);
          }
          return;
        }
        await sleep(200);
      }
      log("taint-removed-by-hand: no power-off to interrupt");
    })()
      .catch((error: unknown) => { log(`taint-removed-by-hand failed: ${String(error)}`); })
      .finally(() => { armed = undefined; });
    return `taint-removed-by-hand: armed, for the next power-off, ${delayMs} ms into it`;
  }

  async function deleteNodeByHand(): Promise<string> {
    const candidates = observer.nodes().filter((n) => n.ready && !n.tainted && !n.marked && site.machineNames.includes(n.name));
    if (candidates.length === 0) return "node-deleted-by-hand: no Ready node to delete";
    const { name } = random.pick(candidates);
    const restartMs = random.int(30_000, 120_000);
    await core.deleteNode({ name });
    later(restartMs, () => {
      site.machines.restartKubelet(name);
      log(`node-deleted-by-hand over: ${name}'s kubelet restarted`);
      return Promise.resolve();
    });
    return count("node-deleted-by-hand", `Node ${name} deleted under its running kubelet, which restarts in ${(restartMs / 1000).toFixed(0)} s`);
  }

  /** Two plugs' addresses reach each other's plug for a while, as when a router hands its leases out anew. */
  function swapAddresses(): string {
    const free = freePlugs();
    if (free.length < 2) return "addresses-swapped: fewer than two plugs without a fault";
    const a = random.pick(free);
    const b = random.pick(free.filter((m) => m !== a));
    const ms = random.int(20_000, 60_000);
    observer.addressesSwapped([a, b], true);
    swap(site.address(a), site.address(b));
    busy.add(a);
    busy.add(b);
    later(ms, () => {
      swap(site.address(a), site.address(b));
      observer.addressesSwapped([a, b], false);
      busy.delete(a);
      busy.delete(b);
      log(`addresses-swapped over: ${a} and ${b} reach their own plugs again`);
      return Promise.resolve();
    });
    return count("addresses-swapped", `the addresses of ${a}'s and ${b}'s plugs reach each other's plug for ${(ms / 1000).toFixed(0)} s`);
  }

  /**
   * A second plugpool runs beside the first for a while, then is SIGKILLed (a crash, a node lost: its Lease must
   * expire) or SIGTERMed (a rolling update: it gives its Lease up). Whichever holds plugpool's Lease acts; the
   * other switches nothing.
   */
  async function startSecondPlugpool(): Promise<string> {
    if (secondRunning) return "second-plugpool: already running";
    secondRunning = true;
    const ms = random.int(20_000, 90_000);
    const crash = random.chance(0.5);
    try {
      await site.secondPlugpool.start();
    } catch (error) {
      secondRunning = false;
      throw error;
    }
    later(ms, async () => {
      await (crash ? site.secondPlugpool.kill() : site.secondPlugpool.stop());
      secondRunning = false;
      log(`second-plugpool over: ${crash ? "SIGKILL" : "SIGTERM"}`);
    });
    return count("second-plugpool", `a second plugpool serves for ${(ms / 1000).toFixed(0)} s, then is ${crash ? "killed" : "stopped"}`);
  }

  /** The plugpool CA calls stops, timers and all, for longer than its Lease, and wakes up. */
  function freezePlugpool(): string {
    if (plugpoolDown || frozen || !site.plugpool.running()) return "plugpool-frozen: not running at the moment";
    const ms = random.int(LEASE_MS + 2_000, LEASE_MS + 25_000);
    frozen = true;
    observer.plugpoolFrozen(true);
    const thaw = site.plugpool.freeze();
    later(ms, () => {
      thaw();
      frozen = false;
      observer.plugpoolFrozen(false);
      log("plugpool-frozen over: SIGCONT");
      return Promise.resolve();
    });
    return count("plugpool-frozen", `SIGSTOP for ${(ms / 1000).toFixed(1)} s${secondRunning ? ", a second plugpool running" : ""}`);
  }

  /** A plugpool's wall clock steps back or forward, up to 10 minutes, staying within 15 minutes of the true time. */
  function stepClock(): string {
    const second = secondRunning && random.chance(0.5);
    const instance = second ? site.secondPlugpool : site.plugpool;
    const size = random.int(5_000, 600_000);
    const current = instance.stepClock(0);
    const within = (ms: number): boolean => Math.abs(current + ms) <= MAX_CLOCK_OFFSET_MS;
    // Either way while both stay within the bound; else back toward the true time.
    const ms = within(size) && within(-size) ? (random.chance(0.5) ? size : -size) : current > 0 ? -size : size;
    const now = instance.stepClock(ms);
    return count("clock-stepped", `${second ? "the second plugpool's" : "plugpool's"} wall clock stepped ${ms > 0 ? "forward" : "back"}; now ${(now / 1000).toFixed(0)} s off`);
  }

  return {
    inject: async () => {
      const kind = random.pick(FAULT_KINDS);
      switch (kind) {
        case "plug-dead":
        case "plug-slow":
        case "plug-flapping":
          return plugFault(kind);
        case "plugpool-killed":
          return killPlugpool();
        case "apiserver-restarted":
          return restartApiServer();
        case "powered-on-by-hand":
          return powerOnByHand();
        case "taint-removed-by-hand":
          return armTaintRemoval();
        case "node-deleted-by-hand":
          return deleteNodeByHand();
        case "addresses-swapped":
          return swapAddresses();
        case "second-plugpool":
          return startSecondPlugpool();
        case "plugpool-frozen":
          return freezePlugpool();
        case "clock-stepped":
          return stepClock();
      }
    },
    counts: () => counts,
    plugpoolDown: () => plugpoolDown,
    end: async () => {
      ending = true;
      await armed;
      for (const entry of [...pending]) {
        clearTimeout(entry.timer);
        pending.delete(entry);
        await entry.finish().catch((error: unknown) => { log(`fault end failed: ${String(error)}`); });
      }
    },
  };
}
