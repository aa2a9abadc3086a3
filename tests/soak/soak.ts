// The soak: the real cluster-autoscaler and plugpool (as its own process) run a random workload on simulated
// machines behind emulated plugs while faults are injected at random, and an independent observer records every
// violation of plugpool's safety promises it sees from outside. The seed fixes the sequence of random choices
// (what they hit still depends on timing).
import { copyFileSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { followLog, parseKlog } from "../harness/autoscaler/ca-log.ts";
import type { Platform, Version } from "../harness/plug-emulator/index.ts";
import { assertBuilt, NAMESPACE, startSite, type MachineSpec } from "../harness/site/index.ts";
import { createFaults, FAULT_KINDS, type FaultKind } from "./faults.ts";
import { createObserver, OUT_OF_VIEW_MS, STUCK_MS, type Violation } from "./observer.ts";
import { seededRandom } from "./prng.ts";
import { createWorkload, WORKLOAD_NAMESPACE } from "./workload.ts";

export interface SoakOptions {
  readonly minutes: number;
  readonly seed: number;
  /** How many simulated machines (default 8). */
  readonly machines?: number;
  /** Where the soak tells what happens (default: stdout). */
  readonly log?: (line: string) => void;
}

export interface SoakResult {
  readonly seed: number;
  readonly minutesRun: number;
  readonly machines: number;
  /** CA's scale-ups ("Scale-up: setting group … size to") and scale-downs ("Scale-down: removing …"). */
  readonly scaleUps: number;
  readonly scaleDowns: number;
  /** Switch-on and switch-off requests that changed a relay, as the plugs saw them. */
  readonly powerOns: number;
  readonly powerOffs: number;
  readonly powerOffPods: number;
  readonly leaseHandovers: number;
  readonly secondTookLease: number;
  readonly faults: Readonly<Record<FaultKind, number>>;
  readonly violations: readonly Violation[];
  readonly notes: readonly string[];
}

const SETTLE_MS = 5_000;
/** CA's --max-node-provision-time here. */
const PROVISION_MS = 45_000;

/** The cluster-autoscaler flags the soak changes from the end-to-end suite's (tests/harness/autoscaler/process.ts). */
const AUTOSCALER_FLAGS: Readonly<Record<string, string>> = {
  "max-node-provision-time": `${PROVISION_MS / 1000}s`,
  "scale-down-unneeded-time": "10s",
  // A failed scale-up (a dead plug, a quarantined machine) backs the group off for 10 s, doubling up to a minute
  // (defaults 5 min and 30 min): long enough to matter, short enough to go on scaling within a soak.
  "initial-node-group-backoff-duration": "10s",
  "max-node-group-backoff-duration": "1m",
};

/** The machines' names: `worker-1` … `worker-n`. */
function machineNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `worker-${i + 1}`);
}

/** The machines, on plugs of every firmware profile, every other one with a power sensor. */
function machinePlans(count: number): MachineSpec[] {
  const profiles: { version: Version; platform: Platform }[] = [
    { version: "2026.7", platform: "esp32" },
    { version: "2026.1", platform: "esp32" },
    { version: "2025.12", platform: "esp8266" },
    { version: "2026.7", platform: "esp8266" },
  ];
  return machineNames(count).map((name, i) => {
    const profile = profiles[i % profiles.length] ?? { version: "2026.7", platform: "esp32" };
    return { name, ...profile, restoreMode: "RESTORE_DEFAULT_OFF", powerSensor: i % 2 === 0 };
  });
}

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  assertBuilt();
  const write = options.log ?? ((line: string) => { console.log(line); });
  const began = performance.now();
  const say = (message: string): void => {
    write(`[${((performance.now() - began) / 1000).toFixed(1).padStart(7)}s] ${message}`);
  };
  const count = options.machines ?? 8;
  say(`soak: seed ${options.seed}, ${options.minutes} min, ${count} machines (again: npm run soak -- --minutes ${options.minutes} --seed ${options.seed})`);
  say(`bounds: a machine out of everyone's view ${OUT_OF_VIEW_MS / 1000} s, a power-off ${STUCK_MS / 1000} s`);

  const observer = createObserver(machineNames(count), say);
  // plugpool as its own process, as the container runs it, reached only through its published interfaces (config
  // file, CLI, gRPC port, readiness endpoint), with a wall clock the faults can step; the plugs behind addresses the
  // faults can swap.
  const site = await startSite({
    machines: machinePlans(count),
    plugpool: "process",
    leases: true,
    namespaces: [WORKLOAD_NAMESPACE],
    bootDelayMs: 2000,
    shutdownDelayMs: 1500,
    config: {
      quarantine: { initial: "30s", max: "2m" },
      // cluster-autoscaler's namespace, which a pod learns from POD_NAMESPACE.
      leaderElection: { followAutoscaler: { namespace: NAMESPACE } },
    },
    autoscalerFlags: AUTOSCALER_FLAGS,
    onPlugRequest: (machine, record) => { observer.onPlugRequest(machine, record); },
    log: say,
  });
  const notes: string[] = [];
  let scaleUps = 0;
  let scaleDowns = 0;
  // CA may log one decision twice within a loop: a repeat within two seconds is the same one.
  const lastSeen = new Map<string, number>();
  const onCaLine = (raw: string): void => {
    const line = parseKlog(raw);
    if (line === undefined) return;
    const now = performance.now();
    const repeat = now - (lastSeen.get(line.message) ?? -Infinity) < 2_000;
    lastSeen.set(line.message, now);
    if (repeat) return;
    if (/^Scale-up: setting group \S+ size to/.test(line.message)) {
      scaleUps += 1;
      say(`cluster-autoscaler: ${line.message}`);
    } else if (/^Scale-down: removing/.test(line.message)) {
      scaleDowns += 1;
      say(`cluster-autoscaler: ${line.message}`);
    }
  };
  let caLog = followLog(site.autoscaler.logPath, onCaLine);
  const stopLoops = new AbortController();
  const { signal } = stopLoops;
  /** Sleeps `ms`; false once the soak is over. */
  const pause = (ms: number): Promise<boolean> => sleep(ms, true, { signal }).catch(() => false);

  try {
    await observer.start(site.admin, (machine) => site.plug(machine), (machine) => site.machines.state(machine) === "halted");
    const workload = createWorkload(site.admin, seededRandom(options.seed));
    const faults = createFaults(site, observer, seededRandom(options.seed ^ 0x5eed), say);

    const workloadLoop = async (): Promise<void> => {
      const random = seededRandom(options.seed + 1);
      while (await pause(random.int(4_000, 12_000))) {
        try {
          say(`workload: ${await workload.step()}`);
        } catch (error) {
          say(`workload step failed: ${message(error)}`);
        }
      }
    };
    const faultLoop = async (): Promise<void> => {
      const random = seededRandom(options.seed + 2);
      while (await pause(random.int(8_000, 25_000))) {
        try {
          say(`fault: ${await faults.inject()}`);
        } catch (error) {
          say(`fault injection failed: ${message(error)}`);
        }
      }
    };
    // Neither CA nor plugpool should stop by themselves; if one does, it is told and started again.
    const supervisor = async (): Promise<void> => {
      while (await pause(2_000)) {
        if (!site.autoscaler.running()) {
          const note = `cluster-autoscaler exited; its log ended:\n${site.autoscaler.logTail(20)}`;
          notes.push(note);
          say(note);
          caLog.stop();
          await site.restartAutoscaler().catch((error: unknown) => { say(`cluster-autoscaler did not restart: ${message(error)}`); });
          caLog = followLog(site.autoscaler.logPath, onCaLine);
        }
        if (!site.plugpool.running() && !faults.plugpoolDown()) {
          const note = `plugpool was not running without being killed; its log ended:\n${site.plugpool.logTail(20)}`;
          notes.push(note);
          say(note);
          await site.plugpool.start().catch((error: unknown) => { say(`plugpool did not start: ${message(error)}`); });
        }
      }
    };

    const loops = Promise.all([workloadLoop(), faultLoop(), supervisor()]);
    await sleep(options.minutes * 60_000);
    stopLoops.abort();
    await loops;
    say("soak over: ending every fault");
    await faults.end();
    await sleep(SETTLE_MS);

    const violations = observer.violations();
    if (violations.length > 0) {
      const kept = mkdtempSync(join(tmpdir(), `plugpool-soak-${options.seed}-logs-`));
      copyFileSync(site.plugpool.logPath, join(kept, "plugpool.log"));
      if (existsSync(site.secondPlugpool.logPath)) copyFileSync(site.secondPlugpool.logPath, join(kept, "plugpool-b.log"));
      copyFileSync(site.autoscaler.logPath, join(kept, "cluster-autoscaler.log"));
      const short = (text: string): string => text.split("\n").map((l) => (l.length > 300 ? `${l.slice(0, 300)}…` : l)).join("\n");
      write(`--- plugpool ---\n${short(site.plugpool.logTail(30))}`);
      write(`--- cluster-autoscaler ---\n${short(site.autoscaler.logTail(30))}`);
      write(`--- the whole logs are kept in ${kept} ---`);
    }
    const stats = observer.stats();
    return {
      seed: options.seed,
      minutesRun: (performance.now() - began) / 60_000,
      machines: count,
      scaleUps,
      scaleDowns,
      ...stats,
      faults: { ...faults.counts() },
      violations: [...violations],
      notes: [...notes, ...observer.notes()],
    };
  } finally {
    stopLoops.abort();
    caLog.stop();
    await observer.stop();
    await site.stop();
  }
}

export function formatSummary(result: SoakResult): string {
  const faults = FAULT_KINDS.map((k) => `${k} ${result.faults[k]}`).join(", ");
  const total = FAULT_KINDS.reduce((sum, k) => sum + result.faults[k], 0);
  return [
    "=== soak summary ===",
    `seed: ${result.seed}`,
    `minutes run: ${result.minutesRun.toFixed(1)} (${result.machines} machines)`,
    `scale cycles: ${result.scaleUps} scale-ups and ${result.scaleDowns} scale-downs by cluster-autoscaler; ` +
      `plugs switched on ${result.powerOns} times and off ${result.powerOffs} times; ${result.powerOffPods} power-off pods`,
    `plugpool's Lease changed hands ${result.leaseHandovers} times, ${result.secondTookLease} of them to the second plugpool`,
    `faults injected: ${total} (${faults})`,
    ...(result.notes.length > 0 ? [`notes: ${result.notes.length}`, ...result.notes.map((n) => `  - ${n.split("\n")[0] ?? ""}`)] : []),
    `violations: ${result.violations.length}`,
    ...result.violations.map((v) => `  - ${new Date(v.at).toISOString()} ${v.kind}: ${v.detail}`),
  ].join("\n");
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
