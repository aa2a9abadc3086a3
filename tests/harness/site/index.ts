// The test site, all on loopback, as production wires it: a real control plane (with controller-manager and
// scheduler), emulated power devices (ESPHome plugs, Shelly devices, a Home Assistant, a Redfish BMC) with simulated
// machines behind them, plugpool serving — in this process, or as its own process as the image runs it — and
// cluster-autoscaler talking to it over externalgrpc: the real one or, for the sandbox on a machine without it, a
// stand-in (tests/harness/autoscaler/stand-in.ts). plugpool and CA act as the example ServiceAccount of
// deploy/examples/rbac.yaml; the simulated kubelets act as admin.
//
// The end-to-end scenarios, the soak and the sandbox run on `startSite`. Tests of another shape (two pods of
// plugpool and CA, plugpool facing failing plugs, the bench) build theirs from the same parts, exported here:
// `startCluster` (the control plane and who plugpool acts as), `startDevices`, `plugpoolConfig` (its config file)
// and `startPlugpoolProcess` (plugpool as its own process).
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { loadConfig } from "../../../src/app/config/index.ts";
import { parseDuration } from "../../../src/app/config/duration.ts";
import { AUTOSCALER_FLAGS, startAutoscaler, type AutoscalerProcess } from "../autoscaler/process.ts";
import { startAutoscalerStandIn } from "../autoscaler/stand-in.ts";
import { autoscalerMissing, autoscalerNotBuilt, type AutoscalerBuild } from "../autoscaler/autoscaler.ts";
import type { ControlPlane } from "../control-plane/index.ts";
import { createOwnedTempDir, onAbruptExit } from "../control-plane/process.ts";
import { freePorts } from "../control-plane/readiness.ts";
import { createCloudProviderClient, type CloudProviderClient } from "../grpc-client.ts";
import { startMachineSimulator, type MachineSimulator, type MachineState } from "../machine-simulator.ts";
import type { CallRecord } from "../plug-emulator/index.ts";
import { NAMESPACE, startCluster } from "./cluster.ts";
import { PREFIX, plugpoolConfig } from "./config.ts";
import { startDevices, type Devices, type MachineSpec } from "./devices.ts";
import { createFileLogger, type LogLine } from "./plugpool-log.ts";
import { processPlugpool, servedPlugpool, type ProcessPlugpool, type ServedPlugpool } from "./plugpools.ts";

export * from "./cluster.ts";
export * from "./config.ts";
export * from "./devices.ts";
export * from "./plugpool-log.ts";
export * from "./plugpool-process.ts";
export * from "./plugpools.ts";

/** The label of the site's node group, on its template and on every simulated machine's Node. */
export const POOL_LABEL = { "example.com/pool": "workers" } as const;
/** plugpool's power-off timings on the site: the OS has 20 s to go NotReady, then 1 s of grace. */
export const NOT_READY_TIMEOUT_MS = 20_000;
export const GRACE_MS = 1_000;
/** The pod name of the plugpool cluster-autoscaler calls when plugpool runs as a process: its Lease holder identity starts with it. */
export const CALLED_PLUGPOOL = "plugpool";
/** What a small machine draws idling: the sandbox's energy-avoided figures. */
const IDLE_WATTS = 12;

export type PlugpoolMode = "in-process" | "process";

export interface SiteOptions<M extends PlugpoolMode = PlugpoolMode> {
  /** The machines, in config order, each in group `workers`. */
  readonly machines: readonly MachineSpec[];
  /**
   * How plugpool runs: "in-process" (the default: serve() in this process), or "process": the bundle (npm run
   * bundle), as the image runs it, with a second one on the same config ready to start (`secondPlugpool`).
   */
  readonly plugpool?: M;
  /** plugpool runs with `serve --dry-run`: it observes only (in this process only). */
  readonly dryRun?: boolean;
  /** Sections of plugpool's config besides the site's (plug timeout 1 s, short power-off timings): quarantine… */
  readonly config?: Readonly<Record<string, unknown>>;
  /** Each plug behind an address of its own that a test can point at another device (`address`). */
  readonly leases?: boolean;
  /** More namespaces, for a workload. */
  readonly namespaces?: readonly string[];
  /** How long a machine takes to boot once powered (default 1 s). */
  readonly bootDelayMs?: number;
  /** How long a machine's OS takes to shut down once its power-off pod runs (default 500 ms). */
  readonly shutdownDelayMs?: number;
  /**
   * Which autoscaler drives plugpool: "real" (the default) requires cluster-autoscaler's binary; "stand-in"
   * runs tests/harness/autoscaler/stand-in.ts, which is not CA; "auto" takes the real one when it is built.
   */
  readonly autoscaler?: "real" | "stand-in" | "auto";
  /** Which build of the real cluster-autoscaler (default: the release). */
  readonly autoscalerBuild?: AutoscalerBuild;
  /**
   * Overrides of tests/harness/autoscaler/process.ts AUTOSCALER_FLAGS. The stand-in honours scan-interval,
   * scale-down-unneeded-time and max-node-provision-time of the result.
   */
  readonly autoscalerFlags?: Readonly<Record<string, string>>;
  readonly onMachineChange?: (machine: string, state: MachineState) => void;
  /** Every line plugpool logs (in this process only). */
  readonly onPlugpoolLog?: (line: LogLine) => void;
  /** Called as each request reaches a machine's plug, before the plug acts on it. */
  readonly onPlugRequest?: (machine: string, record: Readonly<CallRecord>) => void;
  /**
   * Told where the site's logs are once it is up, and each part that failed to stop; without it, stop() stops
   * every part and then throws the first failure.
   */
  readonly log?: (message: string) => void;
}

export interface Site<M extends PlugpoolMode = "in-process">
  extends Pick<Devices, "plug" | "shelly" | "redfish" | "homeAssistant" | "address" | "powered"> {
  readonly plane: ControlPlane;
  /** Admin: the scenarios and the soak's observer act as the cluster's operator. */
  readonly admin: KubeConfig;
  readonly core: CoreV1Api;
  readonly machines: MachineSimulator;
  /** The machines' names, in config order. */
  readonly machineNames: readonly string[];
  /** Where the site's files are: plugpool's config, logs and secrets. */
  readonly dir: string;
  /** The plugpool cluster-autoscaler calls. */
  readonly plugpool: M extends "process" ? ProcessPlugpool : ServedPlugpool;
  /**
   * Another plugpool on the same config, with a gRPC port of its own and pod name plugpool-b, as a rolling update or
   * a second replica runs it: cluster-autoscaler never calls it. Not started until `start()`.
   */
  readonly secondPlugpool: M extends "process" ? ProcessPlugpool : undefined;
  /** The running autoscaler (replaced by `restartAutoscaler`). */
  readonly autoscaler: AutoscalerProcess;
  /** Which one `autoscaler` is. */
  readonly autoscalerKind: "real" | "stand-in";
  restartAutoscaler(): Promise<void>;
  /** A grpc-js client of plugpool, as a second caller next to CA. */
  readonly client: CloudProviderClient;
  /** The lines of CA's log so far that match `pattern`. */
  caLog(pattern: RegExp): string[];
  /** Every state the machine went through, in order. */
  history(machine: string): readonly MachineState[];
  /** Tails of CA's and plugpool's logs, and the simulator's failed calls. */
  diagnostics(): string;
  /** Stops everything and removes the site's files. */
  stop(): Promise<void>;
}

type Cleanup = () => Promise<void> | void;

export async function startSite<M extends PlugpoolMode = "in-process">(options: SiteOptions<M>): Promise<Site<M>> {
  // Before anything starts: the one binary that a fresh machine is most likely to lack. "auto" falls back to
  // the stand-in only where CA cannot be built; where its source ships, an unbuilt CA is an error.
  const mode = options.autoscaler ?? "real";
  const kind = mode === "stand-in" || (mode === "auto" && autoscalerMissing() !== undefined) ? "stand-in" : "real";
  const notBuilt = autoscalerNotBuilt(options.autoscalerBuild);
  if (kind === "real" && notBuilt !== undefined) throw new Error(notBuilt);
  const cleanups: Cleanup[] = [];
  const stop = async (): Promise<void> => {
    const failures: unknown[] = [];
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        if (options.log === undefined) failures.push(error);
        else options.log(`cleanup failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    if (failures.length > 0) throw failures[0];
  };
  try {
    return await start(options, kind, cleanups, stop);
  } catch (error) {
    await stop();
    throw error;
  }
}

async function start<M extends PlugpoolMode>(
  options: SiteOptions<M>,
  autoscalerKind: "real" | "stand-in",
  cleanups: Cleanup[],
  stop: () => Promise<void>,
): Promise<Site<M>> {
  const dir = createOwnedTempDir("plugpool-site-");
  const unregister = onAbruptExit(() => { rmSync(dir, { recursive: true, force: true }); });
  cleanups.push(() => { rmSync(dir, { recursive: true, force: true }); unregister(); });

  const cluster = await startCluster({ ...(options.namespaces && { namespaces: options.namespaces }) });
  const { plane, admin, core } = cluster;
  cleanups.push(() => plane.stop());
  const devices = await startDevices(options.machines, dir, cleanups, {
    ...(options.leases !== undefined && { leases: options.leases }),
    ...(options.onPlugRequest && { onPlugRequest: options.onPlugRequest }),
  });

  const histories = new Map<string, MachineState[]>(options.machines.map((m) => [m.name, []]));
  const machines = simulateMachines(options, devices, admin, (machine, state) => {
    histories.get(machine)?.push(state);
    options.onMachineChange?.(machine, state);
  });
  cleanups.push(() => machines.stop());

  // Fixed gRPC ports: a plugpool started again serves where cluster-autoscaler calls it.
  const ports = await freePorts(["grpc", "second"]);
  const configText = (grpcPort: number): string => plugpoolConfig({
    grpcPort,
    groups: [{ id: "workers", idleWatts: IDLE_WATTS, labels: POOL_LABEL, nodes: options.machines.map((m) => devices.configNode(m)) }],
    deviceTimeout: "1s",
    sections: {
      powerOff: { namespace: NAMESPACE, notReadyTimeout: `${NOT_READY_TIMEOUT_MS / 1000}s`, grace: `${GRACE_MS / 1000}s`, standbyWatts: 5, standbyWindow: "500ms" },
      ...options.config,
    },
  });
  const plugpools = createPlugpools(options, { dir, identity: cluster.identity, kubeconfigPath: cluster.kubeconfigPath, configText, ports });
  const { plugpool, secondPlugpool } = plugpools;
  await plugpool.start();
  cleanups.push(() => plugpool.stop());
  if (secondPlugpool !== undefined) cleanups.push(() => secondPlugpool.stop());

  const grpcAddress = `127.0.0.1:${ports.grpc}`;
  const startCa = (): Promise<AutoscalerProcess> => startDrivingAutoscaler(options, autoscalerKind, cluster.kubeconfigPath, grpcAddress);
  let autoscaler = await startCa();
  // Stopped before plugpool, which answers its Cleanup.
  cleanups.push(() => autoscaler.stop());
  const client = createCloudProviderClient(grpcAddress);
  cleanups.push(() => { client.close(); });
  options.log?.(`site up: ${options.machines.length} machines, logs in ${dir}, ${autoscalerKind === "real" ? "cluster-autoscaler" : "its stand-in"}'s log ${autoscaler.logPath}`);

  return {
    plane,
    admin,
    core,
    machines,
    machineNames: options.machines.map((m) => m.name),
    dir,
    ...plugpools,
    get autoscaler() {
      return autoscaler;
    },
    autoscalerKind,
    restartAutoscaler: async () => {
      await autoscaler.stop();
      autoscaler = await startCa();
    },
    client,
    caLog: (pattern) => autoscaler.log().split("\n").filter((line) => pattern.test(line)),
    plug: devices.plug,
    shelly: devices.shelly,
    homeAssistant: devices.homeAssistant,
    redfish: devices.redfish,
    address: devices.address,
    powered: devices.powered,
    history: (machine) => histories.get(machine) ?? [],
    diagnostics: () =>
      [
        `--- cluster-autoscaler (${autoscaler.logPath}) ---`, autoscaler.logTail(80),
        `--- plugpool ---`, plugpool.logTail(40),
        `--- simulator failures ---`, machines.failures().map(String).join("\n") || "(none)",
      ].join("\n"),
    stop,
  };
}

/** The machines behind the devices, each registering a Node with the pool's label once it boots. */
function simulateMachines(options: SiteOptions, devices: Devices, admin: KubeConfig, onChange: (machine: string, state: MachineState) => void): MachineSimulator {
  return startMachineSimulator({
    kubeConfig: admin,
    providerIDPrefix: PREFIX,
    machines: options.machines.map((m) => ({
      name: m.name,
      ...devices.powerSource(m),
      neverBoots: m.neverBoots === true,
      ...(m.nodeName !== undefined && { nodeName: m.nodeName }),
      ...(m.dra !== undefined && { dra: m.dra }),
    })),
    capacity: { cpu: "4", memory: "8Gi", pods: "110" },
    labels: POOL_LABEL,
    bootDelayMs: options.bootDelayMs ?? 1000,
    shutdownDelayMs: options.shutdownDelayMs ?? 500,
    heartbeatMs: 1000,
    onChange,
  });
}

/** Where plugpool finds what it needs. */
interface PlugpoolPlace {
  readonly dir: string;
  readonly identity: KubeConfig;
  readonly kubeconfigPath: string;
  /** plugpool's config serving gRPC on this port. */
  configText(grpcPort: number): string;
  readonly ports: { readonly grpc: number; readonly second: number };
}

/** The site's plugpools as `options.plugpool` asks; none started yet. */
function createPlugpools<M extends PlugpoolMode>(options: SiteOptions<M>, place: PlugpoolPlace): Pick<Site<M>, "plugpool" | "secondPlugpool"> {
  if (options.plugpool === "process") {
    const instance = (name: string, grpcPort: number): ProcessPlugpool => {
      const configPath = join(place.dir, `${name}.yaml`);
      writeFileSync(configPath, place.configText(grpcPort));
      return processPlugpool({ name, dir: place.dir, configPath, kubeconfigPath: place.kubeconfigPath });
    };
    const both = { plugpool: instance(CALLED_PLUGPOOL, place.ports.grpc), secondPlugpool: instance("plugpool-b", place.ports.second) };
    return both as Pick<Site<M>, "plugpool" | "secondPlugpool">;
  }
  const lines: LogLine[] = [];
  const logger = createFileLogger(join(place.dir, "plugpool.log"), (line) => {
    lines.push(line);
    options.onPlugpoolLog?.(line);
  });
  const plugpool = servedPlugpool({
    config: loadConfig(place.configText(place.ports.grpc), {}),
    kubeConfig: place.identity,
    logger,
    lines,
    // In the namespace of the example Deployment's pod, as POD_NAMESPACE would tell it: cluster-autoscaler's
    // Lease would be there.
    namespace: NAMESPACE,
    ...(options.dryRun !== undefined && { dryRun: options.dryRun }),
  });
  return { plugpool, secondPlugpool: undefined } as Pick<Site<M>, "plugpool" | "secondPlugpool">;
}

/** The real cluster-autoscaler, or its stand-in, calling plugpool at `grpcAddress`. */
async function startDrivingAutoscaler(
  options: SiteOptions,
  kind: "real" | "stand-in",
  kubeconfigPath: string,
  grpcAddress: string,
): Promise<AutoscalerProcess> {
  if (kind === "real") {
    return startAutoscaler({
      kubeconfigPath,
      grpcAddress,
      ...(options.autoscalerBuild !== undefined && { build: options.autoscalerBuild }),
      ...(options.autoscalerFlags && { flags: options.autoscalerFlags }),
    });
  }
  const flags = { ...AUTOSCALER_FLAGS, ...options.autoscalerFlags };
  const ms = (flag: string): number | undefined => parseDuration(flags[flag] ?? "");
  return startAutoscalerStandIn({
    kubeconfigPath,
    grpcAddress,
    intervalMs: ms("scan-interval"),
    unneededMs: ms("scale-down-unneeded-time"),
    provisionMs: ms("max-node-provision-time"),
  });
}
