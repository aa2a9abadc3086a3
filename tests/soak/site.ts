// The soak's site, all on loopback: a real control plane (with controller-manager and scheduler), emulated ESPHome
// plugs with simulated machines behind them, plugpool as its own process (`node dist/plugpool.mjs serve`, as
// the container runs it, with a wall clock the soak can step: clock-step.ts), a second plugpool the faults start
// and end, and the real cluster-autoscaler. Built only from the test harness and plugpool's
// published interfaces (its config file, CLI, gRPC port and readiness endpoint), never from its source.
import { readFileSync, rmSync, statSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, KubernetesObjectApi, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { startAutoscaler, type AutoscalerProcess } from "../harness/autoscaler/process.ts";
import { startControlPlane, type ControlPlane } from "../harness/control-plane/index.ts";
import { tokenKubeConfig } from "../harness/control-plane/credentials.ts";
import { createOwnedTempDir, onAbruptExit, startProcess, type ManagedProcess } from "../harness/control-plane/process.ts";
import { answersOk, freePorts, waitUntilReady } from "../harness/control-plane/readiness.ts";
import { startMachineSimulator, type MachineSimulator } from "../harness/machine-simulator.ts";
import { startPlugEmulator, type CallRecord, type EmulatedPlug, type Platform, type Version } from "../harness/plug-emulator/index.ts";
import { lease, type Lease } from "../harness/lease.ts";

const repo = join(import.meta.dirname, "..", "..");
const plugpoolMain = join(repo, "dist", "plugpool.mjs");

export const PREFIX = "k3s://";
/** The pod name of the plugpool cluster-autoscaler calls: its Lease holder identity starts with it. */
export const CALLED_PLUGPOOL = "plugpool";
export const POWER_OFF_NAMESPACE = "plugpool";
export const WORKLOAD_NAMESPACE = "soak";
export const POOL_LABEL = { "example.com/pool": "workers" } as const;
export const SWITCH = "Relay";
/** plugpool's power-off timings here: the OS has 20 s to go NotReady, then 1 s of grace. */
export const NOT_READY_TIMEOUT_MS = 20_000;
export const GRACE_MS = 1_000;
/** CA's --max-node-provision-time here. */
export const PROVISION_MS = 45_000;

/** The cluster-autoscaler flags the soak changes from the end-to-end suite's (tests/harness/autoscaler/process.ts). */
const AUTOSCALER_FLAGS: Readonly<Record<string, string>> = {
  "max-node-provision-time": `${PROVISION_MS / 1000}s`,
  "scale-down-unneeded-time": "10s",
  // A failed scale-up (a dead plug, a quarantined machine) backs the group off for 10 s, doubling up to a minute
  // (defaults 5 min and 30 min): long enough to matter, short enough to go on scaling within a soak.
  "initial-node-group-backoff-duration": "10s",
  "max-node-group-backoff-duration": "1m",
};

interface MachinePlan {
  readonly name: string;
  readonly version: Version;
  readonly platform: Platform;
  readonly powerSensor: boolean;
}

/** The machines' names: `worker-1` … `worker-n`. */
export function machineNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `worker-${i + 1}`);
}

/** The machines, on plugs of every firmware profile, every other one with a power sensor. */
function machinePlans(count: number): MachinePlan[] {
  const profiles: { version: Version; platform: Platform }[] = [
    { version: "2026.7", platform: "esp32" },
    { version: "2026.1", platform: "esp32" },
    { version: "2025.12", platform: "esp8266" },
    { version: "2026.7", platform: "esp8266" },
  ];
  return machineNames(count).map((name, i) => {
    const profile = profiles[i % profiles.length] ?? { version: "2026.7", platform: "esp32" };
    return { name, ...profile, powerSensor: i % 2 === 0 };
  });
}

export interface SiteOptions {
  readonly machines: number;
  /** Called as each request reaches a machine's plug, before the plug acts on it. */
  readonly onPlugRequest: (machine: string, record: Readonly<CallRecord>) => void;
  readonly log: (message: string) => void;
}

export interface Site {
  readonly plane: ControlPlane;
  /** Admin client: the fault injector and the observer act as the cluster's operator. */
  readonly admin: KubeConfig;
  readonly machines: readonly string[];
  readonly simulator: MachineSimulator;
  plug(machine: string): EmulatedPlug;
  /** The address plugpool is configured with for the machine's plug: it may be made to reach another plug. */
  address(machine: string): Lease;
  readonly plugpool: PlugpoolProcess;
  /**
   * Another plugpool on the same config, ports of its own and another pod name, as a rolling update or a second
   * replica runs it: cluster-autoscaler never calls it. Not started until `start()`.
   */
  readonly secondPlugpool: PlugpoolProcess;
  /** The running cluster-autoscaler (replaced by `restartAutoscaler`). */
  autoscaler(): AutoscalerProcess;
  restartAutoscaler(): Promise<void>;
  /** Where the logs are, for a failure message. */
  readonly dir: string;
  stop(): Promise<void>;
}

export interface PlugpoolProcess {
  readonly logPath: string;
  running(): boolean;
  /** SIGKILL, as a crash would end it. */
  kill(): Promise<void>;
  /** Starts it again (same config, same ports); resolves once it is ready. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** SIGSTOP now; the function returned sends SIGCONT, unless this process has been replaced meanwhile. */
  freeze(): () => void;
  /** Steps its wall clock by `ms` (either way), on top of earlier steps; resolves with the total offset. */
  stepClock(ms: number): number;
  logTail(lines?: number): string;
}

/** Throws unless dist/ holds a bundle of the current src/ (the soak runs what `npm run bundle` made). */
export function assertBuilt(): void {
  const built = (() => {
    try {
      return statSync(plugpoolMain).mtimeMs;
    } catch {
      return undefined;
    }
  })();
  if (built === undefined) throw new Error(`${plugpoolMain} is missing: run npm run bundle first`);
  const newest = newestMtime(join(repo, "src"));
  if (newest > built) throw new Error(`${plugpoolMain} is older than src/: run npm run bundle first`);
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

export async function startSite(options: SiteOptions): Promise<Site> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const stop = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        options.log(`cleanup failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  };
  try {
    return await start(options, cleanups, stop);
  } catch (error) {
    await stop();
    throw error;
  }
}

async function start(options: SiteOptions, cleanups: (() => Promise<void> | void)[], stop: () => Promise<void>): Promise<Site> {
  const dir = createOwnedTempDir("plugpool-soak-");
  const unregister = onAbruptExit(() => { rmSync(dir, { recursive: true, force: true }); });
  cleanups.push(() => { rmSync(dir, { recursive: true, force: true }); unregister(); });

  const plane = await startControlPlane({ controllerManager: true, scheduler: true });
  cleanups.push(() => plane.stop());
  const admin = plane.admin();
  const core = admin.makeApiClient(CoreV1Api);
  await applyExample(admin, ["namespace.yaml", "rbac.yaml"]);
  await core.createNamespace({ body: { metadata: { name: WORKLOAD_NAMESPACE } } });
  const identity = await exampleServiceAccount(plane, admin);
  const kubeconfigPath = await plane.kubeconfigFor(identity);

  const plans = machinePlans(options.machines);
  const plugs = new Map<string, EmulatedPlug>();
  const addresses = new Map<string, Lease>();
  for (const m of plans) {
    const plug = await startPlugEmulator({
      version: m.version,
      platform: m.platform,
      switches: [{ name: SWITCH, restoreMode: "RESTORE_DEFAULT_OFF", ...(m.powerSensor && { powerSensor: "Power" }) }],
      onRequest: (record) => { options.onPlugRequest(m.name, record); },
    });
    plugs.set(m.name, plug);
    cleanups.push(() => plug.close());
    const address = await lease(plug.url);
    addresses.set(m.name, address);
    cleanups.push(() => address.close());
  }
  const plug = (machine: string): EmulatedPlug => {
    const found = plugs.get(machine);
    if (found === undefined) throw new Error(`no plug for ${machine}`);
    return found;
  };

  const simulator = startMachineSimulator({
    kubeConfig: admin,
    providerIDPrefix: PREFIX,
    machines: plans.map((m) => ({ name: m.name, plug: plug(m.name), switchName: SWITCH })),
    capacity: { cpu: "4", memory: "8Gi", pods: "110" },
    labels: POOL_LABEL,
    bootDelayMs: 2000,
    shutdownDelayMs: 1500,
    heartbeatMs: 1000,
  });
  cleanups.push(() => simulator.stop());

  const ports = await freePorts(["grpc", "ops", "grpcB", "opsB"]);
  const instance = (name: string, grpc: number, ops: number): PlugpoolProcess => {
    const configPath = join(dir, `${name}.yaml`);
    writeFileSync(configPath, plugpoolConfig(grpc, ops, plans, addresses));
    return plugpoolProcess({ name, dir, configPath, kubeconfigPath, readyUrl: `http://127.0.0.1:${ops}/readyz` });
  };
  const plugpool = instance(CALLED_PLUGPOOL, ports.grpc, ports.ops);
  const secondPlugpool = instance("plugpool-b", ports.grpcB, ports.opsB);
  await plugpool.start();
  cleanups.push(() => plugpool.stop());
  cleanups.push(() => secondPlugpool.stop());

  const grpcAddress = `127.0.0.1:${ports.grpc}`;
  let autoscaler = await startAutoscaler({ kubeconfigPath, grpcAddress, flags: AUTOSCALER_FLAGS });
  // Stopped before plugpool, which answers its Cleanup.
  cleanups.push(() => autoscaler.stop());
  options.log(`site up: ${plans.length} machines, logs in ${dir}, cluster-autoscaler log ${autoscaler.logPath}`);

  return {
    plane,
    admin,
    machines: plans.map((m) => m.name),
    simulator,
    plug,
    address: (machine) => {
      const found = addresses.get(machine);
      if (found === undefined) throw new Error(`no address for ${machine}`);
      return found;
    },
    plugpool,
    secondPlugpool,
    autoscaler: () => autoscaler,
    restartAutoscaler: async () => {
      await autoscaler.stop();
      autoscaler = await startAutoscaler({ kubeconfigPath, grpcAddress, flags: AUTOSCALER_FLAGS });
    },
    dir,
    stop,
  };
}

/** plugpool's configuration file: one group of every machine, short power-off timings, 1 s plug timeout. */
function plugpoolConfig(grpc: number, ops: number, plans: readonly MachinePlan[], addresses: ReadonlyMap<string, Lease>): string {
  const node = (m: MachinePlan): string =>
    `      - { name: ${m.name}, plug: { url: "${addresses.get(m.name)?.url ?? ""}", switch: ${SWITCH}${m.powerSensor ? ", powerSensor: Power" : ""} } }`;
  return [
    `listen: 127.0.0.1:${grpc}`,
    `opsListen: 127.0.0.1:${ops}`,
    `providerIDPrefix: "${PREFIX}"`,
    "plugs: { timeout: 1s }",
    `powerOff: { namespace: ${POWER_OFF_NAMESPACE}, notReadyTimeout: ${NOT_READY_TIMEOUT_MS / 1000}s, grace: ${GRACE_MS / 1000}s, standbyWatts: 5, standbyWindow: 500ms }`,
    "quarantine: { initial: 30s, max: 2m }",
    // cluster-autoscaler's namespace, which a pod learns from POD_NAMESPACE.
    `leaderElection: { followAutoscaler: { namespace: ${POWER_OFF_NAMESPACE} } }`,
    "nodeGroups:",
    "  - id: workers",
    `    maxSize: ${plans.length}`,
    `    template: { cpu: '4', memory: 8Gi, labels: { ${Object.entries(POOL_LABEL).map(([k, v]) => `${k}: ${v}`).join(", ")} } }`,
    "    nodes:",
    ...plans.map(node),
    "",
  ].join("\n");
}

const clockStep = join(import.meta.dirname, "clock-step.ts");

interface InstancePlan {
  /** Its pod name (POD_NAME), and the name of its log and clock files. */
  readonly name: string;
  readonly dir: string;
  readonly configPath: string;
  readonly kubeconfigPath: string;
  readonly readyUrl: string;
}

function plugpoolProcess(plan: InstancePlan): PlugpoolProcess {
  let child: ManagedProcess | undefined;
  const logPath = join(plan.dir, `${plan.name}.log`);
  const clockPath = join(plan.dir, `${plan.name}.clock`);
  let offset = 0;
  writeFileSync(clockPath, "0\n");
  const args = ["--import", clockStep, plugpoolMain, "serve", "--config", plan.configPath, "--kubeconfig", plan.kubeconfigPath, "--log-level", "debug"];
  return {
    logPath,
    running: () => child?.running() === true,
    kill: async () => {
      await child?.kill();
    },
    start: async () => {
      if (child?.running() === true) return;
      const started = startProcess(plan.name, process.execPath, args, logPath, { POD_NAME: plan.name, PLUGPOOL_SOAK_CLOCK_FILE: clockPath });
      child = started;
      await waitUntilReady(started, "/readyz", () => answersOk(plan.readyUrl), 60_000);
    },
    stop: async () => {
      await child?.stop(10_000);
    },
    freeze: () => {
      const frozen = child;
      frozen?.freeze();
      return () => {
        if (frozen === child) frozen?.thaw();
      };
    },
    stepClock: (ms) => {
      offset += ms;
      writeFileSync(clockPath, `${offset}\n`);
      return offset;
    },
    logTail: (lines = 40) => child?.logTail(lines) ?? "(not started)",
  };
}

/** Creates the objects of deploy/examples files, as `kubectl create -f` would. */
async function applyExample(admin: KubeConfig, files: readonly string[]): Promise<void> {
  const client = KubernetesObjectApi.makeApiClient(admin);
  for (const file of files) {
    const text = readFileSync(join(repo, "deploy", "examples", file), "utf8");
    for (const doc of parseAllDocuments(text)) {
      const object = doc.toJS() as KubernetesObject | null;
      if (object !== null) await client.create(object);
    }
  }
}

/** A token of the example Deployment's ServiceAccount, which both plugpool and cluster-autoscaler run as. */
async function exampleServiceAccount(plane: ControlPlane, admin: KubeConfig): Promise<KubeConfig> {
  const core = admin.makeApiClient(CoreV1Api);
  const name = "cluster-autoscaler";
  const request = await core.createNamespacedServiceAccountToken({
    namespace: POWER_OFF_NAMESPACE,
    name,
    body: { spec: { audiences: [], expirationSeconds: 7 * 24 * 3600 } },
  });
  const token = request.status?.token;
  const caData = admin.getCurrentCluster()?.caData;
  if (token === undefined || caData === undefined) throw new Error("no token for the example ServiceAccount");
  return tokenKubeConfig(plane.server, Buffer.from(caData, "base64").toString("utf8"), `system:serviceaccount:${POWER_OFF_NAMESPACE}:${name}`, token);
}
