// The whole site on loopback, as production wires it: a real control plane (with controller-manager and
// scheduler), emulated ESPHome plugs, Shelly devices and a Home Assistant with simulated machines behind them, plugpool's `serve`, and the real
// cluster-autoscaler talking to it over externalgrpc (or, for the sandbox on a machine without CA, a stand-in:
// tests/harness/autoscaler/stand-in.ts). plugpool and CA act as the example ServiceAccount of
// deploy/examples/rbac.yaml; the simulated kubelets act as admin.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, type KubeConfig, type V1Device } from "@kubernetes/client-node";
import { loadConfig, type AppConfig } from "../../../src/app/config/index.ts";
import { serve, type Served } from "../../../src/app/serve.ts";
import { parseDuration } from "../../../src/app/config/duration.ts";
import { AUTOSCALER_FLAGS, startAutoscaler, type AutoscalerProcess } from "../../harness/autoscaler/process.ts";
import { startAutoscalerStandIn } from "../../harness/autoscaler/stand-in.ts";
import { autoscalerMissing, autoscalerNotBuilt, type AutoscalerBuild } from "../../harness/autoscaler/autoscaler.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { tokenKubeConfig } from "../../harness/control-plane/credentials.ts";
import { createOwnedTempDir, onAbruptExit } from "../../harness/control-plane/process.ts";
import { freePorts } from "../../harness/control-plane/readiness.ts";
import { createCloudProviderClient, type CloudProviderClient } from "../../harness/grpc-client.ts";
import { pollingOutlet, startMachineSimulator, type MachineSimulator, type MachineState, type Outlet, type PowerSource } from "../../harness/machine-simulator.ts";
import { startShellyEmulator, type EmulatedShelly } from "../../harness/shelly-emulator/index.ts";
import { startHomeAssistantEmulator, type HomeAssistantEmulator } from "../../harness/home-assistant/emulator.ts";
import { startRedfish, type RunningRedfish } from "../../harness/redfish/index.ts";
import { startPlugEmulator, type EmulatedPlug, type Platform, type Version } from "../../harness/plug-emulator/index.ts";
import { apply, exampleManifest } from "../../adapters/kubernetes/support.ts";
import { createFileLogger, type FileLogger, type LogLine } from "./plugpool-log.ts";

export const PREFIX = "k3s://";
export const POOL_LABEL = { "example.com/pool": "workers" } as const;
export const NAMESPACE = "plugpool";
const SERVICE_ACCOUNT = "cluster-autoscaler";

export interface MachineSpec {
  readonly name: string;
  /**
   * What switches it: an emulated ESPHome plug (the default), an emulated Shelly Gen2+ device (switch 0, with
   * its power meter read as the machine's draw when `powerSensor`), or an entity `switch.<name>` of the one
   * emulated Home Assistant all such machines share (with `sensor.<name>` in W when `powerSensor`), or a system
   * of the one real Redfish BMC emulator (sushy-tools) all such machines share, which shuts the OS down itself
   * (Reset GracefulShutdown) instead of the power-off pod.
   */
  readonly backend?: "esphome" | "shelly" | "home-assistant" | "redfish";
  /** The plug's ESPHome version and platform (emulator defaults: 2026.7 on esp32). */
  readonly version?: Version;
  readonly platform?: Platform;
  /** The plug has a power sensor ("Power") and plugpool is configured to read it. */
  readonly powerSensor?: boolean;
  /** Power on, nothing ever registers. */
  readonly neverBoots?: boolean;
  /** The Node name (and providerID suffix) its kubelet registers, when not the machine's name. */
  readonly nodeName?: string;
  /** A DRA driver on the machine: the devices it publishes in a ResourceSlice once the Node registers. */
  readonly dra?: { readonly driver: string; readonly devices: readonly V1Device[] };
}

export interface EnvironmentOptions {
  readonly machines: readonly MachineSpec[];
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
  /** plugpool runs with `serve --dry-run`: it observes only. */
  readonly dryRun?: boolean;
  /** How long a machine's OS takes to shut down once its power-off pod runs (default 500 ms). */
  readonly shutdownDelayMs?: number;
  readonly onMachineChange?: (machine: string, state: MachineState) => void;
  readonly onPlugpoolLog?: (line: LogLine) => void;
}

export interface Environment {
  readonly plane: ControlPlane;
  /** Admin client. */
  readonly core: CoreV1Api;
  readonly machines: MachineSimulator;
  readonly autoscaler: AutoscalerProcess;
  /** Which one `autoscaler` is. */
  readonly autoscalerKind: "real" | "stand-in";
  /** A grpc-js client of plugpool, as a second caller next to CA. */
  readonly client: CloudProviderClient;
  readonly plugpoolLog: FileLogger;
  /** The lines of CA's log so far that match `pattern`. */
  caLog(pattern: RegExp): string[];
  plug(machine: string): EmulatedPlug;
  shelly(machine: string): EmulatedShelly;
  /** The Redfish BMC of the machines on backend "redfish" (each machine is the system of its name). */
  redfish(): RunningRedfish;
  /** The Home Assistant of the machines on backend "home-assistant", and each one's object id in it. */
  homeAssistant(): { readonly hub: HomeAssistantEmulator; objectId(machine: string): string };
  /** Whether the machine's power is on, whatever switches it (for a BMC: as the simulator last saw it). */
  powered(machine: string): boolean;
  /** Every state the machine went through, in order. */
  history(machine: string): readonly MachineState[];
  /** plugpool's domain events so far (log lines with an `event` field), optionally of one type. */
  events(type?: string): readonly LogLine["fields"][];
  /** The running plugpool; undefined while stopped. */
  served(): Served | undefined;
  stopPlugpool(): Promise<void>;
  /** Starts plugpool again with the same config and the same gRPC port. */
  startPlugpool(): Promise<void>;
  /** Tails of CA's and plugpool's logs, and the simulator's failed calls. */
  diagnostics(): string;
  stop(): Promise<void>;
}

export async function startEnvironment(options: EnvironmentOptions): Promise<Environment> {
  // Before anything starts: the one binary that a fresh machine is most likely to lack. "auto" falls back to
  // the stand-in only where CA cannot be built; where its source ships, an unbuilt CA is an error.
  const mode = options.autoscaler ?? "real";
  const kind = mode === "stand-in" || (mode === "auto" && autoscalerMissing() !== undefined) ? "stand-in" : "real";
  const notBuilt = autoscalerNotBuilt(options.autoscalerBuild);
  if (kind === "real" && notBuilt !== undefined) throw new Error(notBuilt);
  const cleanups: (() => Promise<void> | void)[] = [];
  const stop = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  };
  try {
    return await start(options, kind, cleanups, stop);
  } catch (error) {
    await stop();
    throw error;
  }
}

async function start(
  options: EnvironmentOptions,
  autoscalerKind: "real" | "stand-in",
  cleanups: (() => Promise<void> | void)[],
  stop: () => Promise<void>,
): Promise<Environment> {
  const dir = createOwnedTempDir("plugpool-e2e-");
  const unregister = onAbruptExit(() => { rmSync(dir, { recursive: true, force: true }); });
  cleanups.push(() => { rmSync(dir, { recursive: true, force: true }); unregister(); });

  const plane = await startControlPlane({ controllerManager: true, scheduler: true });
  cleanups.push(() => plane.stop());
  const admin = plane.admin();
  const core = admin.makeApiClient(CoreV1Api);
  await apply(admin, [...exampleManifest("namespace.yaml"), ...exampleManifest("rbac.yaml")]);
  const identity = await serviceAccount(plane, admin);

  const plugs = new Map<string, EmulatedPlug>();
  const shellies = new Map<string, EmulatedShelly>();
  for (const m of options.machines) {
    if (m.backend === "shelly") {
      const device = await startShellyEmulator({ gen: 3, switches: [{ metered: m.powerSensor === true }] });
      shellies.set(m.name, device);
      cleanups.push(() => device.close());
      continue;
    }
    if (m.backend === "home-assistant" || m.backend === "redfish") continue;
    const plug = await startPlugEmulator({
      ...(m.version && { version: m.version }),
      ...(m.platform && { platform: m.platform }),
      switches: [{ name: "Relay", ...(m.powerSensor === true && { powerSensor: "Power" }) }],
    });
    plugs.set(m.name, plug);
    cleanups.push(() => plug.close());
  }
  const plug = (machine: string): EmulatedPlug => {
    const found = plugs.get(machine);
    if (found === undefined) throw new Error(`no ESPHome plug for ${machine}`);
    return found;
  };
  const shelly = (machine: string): EmulatedShelly => {
    const found = shellies.get(machine);
    if (found === undefined) throw new Error(`no Shelly device for ${machine}`);
    return found;
  };
  const onHub = options.machines.filter((m) => m.backend === "home-assistant");
  const hub = onHub.length === 0 ? undefined : await startHomeAssistantEmulator({
    switches: onHub.map((m) => objectId(m.name)),
    sensors: Object.fromEntries(onHub.filter((m) => m.powerSensor === true).map((m) => [objectId(m.name), 0])),
  });
  if (hub !== undefined) cleanups.push(() => hub.stop());
  const homeAssistant = (): { hub: HomeAssistantEmulator; objectId: (machine: string) => string } => {
    if (hub === undefined) throw new Error("no machine is on Home Assistant");
    return { hub, objectId };
  };
  const tokenFile = join(dir, "home-assistant-token");
  writeFileSync(tokenFile, hub?.token ?? "");
  const onBmc = options.machines.filter((m) => m.backend === "redfish");
  const bmc = onBmc.length === 0 ? undefined : await startRedfish({ systems: onBmc.map((m) => ({ id: m.name, power: "Off" })) });
  if (bmc !== undefined) cleanups.push(() => bmc.stop());
  const redfish = (): RunningRedfish => {
    if (bmc === undefined) throw new Error("no machine is on Redfish");
    return bmc;
  };
  /** What the simulator last saw of each BMC-powered machine (the emulator's store is read asynchronously). */
  const bmcOutlets = new Map<string, Outlet>();
  const bmcLogin = { username: join(dir, "redfish-username"), password: join(dir, "redfish-password") };
  writeFileSync(bmcLogin.username, bmc?.username ?? "");
  writeFileSync(bmcLogin.password, bmc?.password ?? "");
  const powerOf = (m: MachineSpec): PowerSource => {
    switch (m.backend) {
      case "shelly":
        return { outlet: pollingOutlet({ isOn: () => shelly(m.name).output(0), setWatts: (watts) => { shelly(m.name).setDraw(0, watts); } }) };
      case "home-assistant": {
        const { hub: h } = homeAssistant();
        const id = objectId(m.name);
        const setWatts = m.powerSensor === true ? (watts: number) => { void h.setWatts(id, watts); } : undefined;
        return { outlet: pollingOutlet({ isOn: () => h.stateOf(`switch.${id}`) === "on", ...(setWatts && { setWatts }) }) };
      }
      case "redfish": {
        // The emulator applies a Reset at its first read some seconds later: settling it makes that read the
        // next one (plugpool's read-back), as a real BMC acts within a second.
        const isOn = async (): Promise<boolean> => {
          if ((await redfish().pending(m.name)) !== undefined) await redfish().settle(m.name);
          return (await redfish().powerState(m.name)) === "On";
        };
        const outlet = pollingOutlet({ isOn, intervalMs: 250 });
        bmcOutlets.set(m.name, outlet);
        return { outlet };
      }
      case "esphome":
      case undefined:
        return { plug: plug(m.name), switchName: "Relay" };
    }
  };

  const histories = new Map<string, MachineState[]>(options.machines.map((m) => [m.name, []]));
  const machines = startMachineSimulator({
    kubeConfig: admin,
    providerIDPrefix: PREFIX,
    machines: options.machines.map((m) => ({
      name: m.name,
      ...powerOf(m),
      neverBoots: m.neverBoots === true,
      ...(m.nodeName !== undefined && { nodeName: m.nodeName }),
      ...(m.dra !== undefined && { dra: m.dra }),
    })),
    capacity: { cpu: "4", memory: "8Gi", pods: "110" },
    labels: POOL_LABEL,
    bootDelayMs: 1000,
    shutdownDelayMs: options.shutdownDelayMs ?? 500,
    heartbeatMs: 1000,
    onChange: (machine, state) => {
      histories.get(machine)?.push(state);
      options.onMachineChange?.(machine, state);
    },
  });
  cleanups.push(() => machines.stop());

  const lines: LogLine[] = [];
  const plugpoolLog = createFileLogger(join(dir, "plugpool.log"), (line) => {
    lines.push(line);
    options.onPlugpoolLog?.(line);
  });
  const { grpc } = await freePorts(["grpc"]);
  const urlOf = (m: string): string => plugs.get(m)?.url ?? shellies.get(m)?.url ?? (onBmc.some((b) => b.name === m) ? bmc?.url : hub?.url) ?? "";
  const config = plugpoolConfig(grpc, options.machines, urlOf, { tokenFile, bmcLogin, bmcCa: bmc?.caFile ?? "" });
  let served: Served | undefined;
  const stopPlugpool = async (): Promise<void> => {
    const running = served;
    served = undefined;
    await running?.stop();
  };
  const startPlugpool = async (): Promise<void> => {
    // In the namespace of the example Deployment's pod, as POD_NAMESPACE would tell it: cluster-autoscaler's Lease
    // would be there.
    served ??= await serve(config, {
      kubeConfig: identity, logger: plugpoolLog, version: "e2e", instance: { namespace: NAMESPACE }, ...(options.dryRun === true && { dryRun: true }),
    });
  };
  await startPlugpool();
  cleanups.push(stopPlugpool);

  const grpcAddress = `127.0.0.1:${grpc}`;
  const kubeconfigPath = await plane.kubeconfigFor(identity);
  const flags = { ...AUTOSCALER_FLAGS, ...options.autoscalerFlags };
  const ms = (flag: string): number | undefined => parseDuration(flags[flag] ?? "");
  const autoscaler = autoscalerKind === "stand-in"
    ? startAutoscalerStandIn({
      kubeconfigPath,
      grpcAddress,
      intervalMs: ms("scan-interval"),
      unneededMs: ms("scale-down-unneeded-time"),
      provisionMs: ms("max-node-provision-time"),
    })
    : await startAutoscaler({
      kubeconfigPath,
      grpcAddress,
      ...(options.autoscalerBuild !== undefined && { build: options.autoscalerBuild }),
      ...(options.autoscalerFlags && { flags: options.autoscalerFlags }),
    });
  // Stopped before plugpool, which answers its Cleanup.
  cleanups.push(() => autoscaler.stop());
  const client = createCloudProviderClient(grpcAddress);
  cleanups.push(() => { client.close(); });

  return {
    plane,
    core,
    machines,
    autoscaler,
    autoscalerKind,
    client,
    plugpoolLog,
    caLog: (pattern) => autoscaler.log().split("\n").filter((line) => pattern.test(line)),
    plug,
    shelly,
    homeAssistant,
    redfish,
    powered: (machine) =>
      shellies.has(machine)
        ? shelly(machine).output(0)
        : plugs.has(machine)
          ? plug(machine).state("Relay")
          : (bmcOutlets.get(machine)?.isOn() ?? homeAssistant().hub.stateOf(`switch.${objectId(machine)}`) === "on"),
    history: (machine) => histories.get(machine) ?? [],
    events: (type) => lines.map((l) => l.fields).filter((f) => f.event !== undefined && (type === undefined || f.event === type)),
    served: () => served,
    stopPlugpool,
    startPlugpool,
    diagnostics: () =>
      [
        `--- cluster-autoscaler (${autoscaler.logPath}) ---`, autoscaler.logTail(80),
        `--- plugpool ---`, plugpoolLog.tail(40),
        `--- simulator failures ---`, machines.failures().map(String).join("\n") || "(none)",
      ].join("\n"),
    stop,
  };
}

/** A machine's object id in Home Assistant: its name with "_" for "-". */
function objectId(machine: string): string {
  return machine.replaceAll("-", "_");
}

/** Short timings: a power-off takes seconds. Machines in the order given, all in group `workers`. */
/** Where the secrets of the backends other than ESPHome are, and the BMC's CA. */
interface BackendFiles {
  readonly tokenFile: string;
  readonly bmcLogin: { readonly username: string; readonly password: string };
  readonly bmcCa: string;
}

function plugpoolConfig(grpcPort: number, machines: readonly MachineSpec[], urlOf: (machine: string) => string, files: BackendFiles): AppConfig {
  const { tokenFile, bmcLogin, bmcCa } = files;
  const node = (m: MachineSpec): string => {
    const url = urlOf(m.name);
    switch (m.backend) {
      case "shelly":
        return `      - { name: ${m.name}, shelly: { url: "${url}", switchId: 0, measure: ${m.powerSensor === true} } }`;
      case "home-assistant": {
        const sensor = m.powerSensor === true ? `, powerSensor: sensor.${objectId(m.name)}` : "";
        return `      - { name: ${m.name}, homeAssistant: { url: "${url}", entity: switch.${objectId(m.name)}${sensor}, tokenFile: "${tokenFile}" } }`;
      }
      case "redfish":
        return `      - { name: ${m.name}, redfish: { url: "${url}", system: ${m.name}, caFile: "${bmcCa}", usernameFile: "${bmcLogin.username}", passwordFile: "${bmcLogin.password}", gracefulShutdown: true } }`;
      case "esphome":
      case undefined:
        return `      - { name: ${m.name}, plug: { url: "${url}", switch: Relay${m.powerSensor === true ? ", powerSensor: Power" : ""} } }`;
    }
  };
  return loadConfig(
    [
      `listen: 127.0.0.1:${grpcPort}`,
      "opsListen: 127.0.0.1:0",
      `providerIDPrefix: "${PREFIX}"`,
      "plugs: { timeout: 1s }",
      `powerOff: { namespace: ${NAMESPACE}, notReadyTimeout: 20s, grace: 1s, standbyWatts: 5, standbyWindow: 500ms }`,
      "nodeGroups:",
      "  - id: workers",
      `    maxSize: ${machines.length}`,
      // What a small machine draws idling: the sandbox's energy-avoided figures.
      "    idleWatts: 12",
      `    template: { cpu: '4', memory: 8Gi, labels: { ${Object.entries(POOL_LABEL).map(([k, v]) => `${k}: ${v}`).join(", ")} } }`,
      "    nodes:",
      ...machines.map(node),
    ].join("\n"),
    {},
  );
}

/** The example ServiceAccount with a token for a week (the sandbox may run that long). */
export async function serviceAccount(plane: ControlPlane, admin: KubeConfig): Promise<KubeConfig> {
  const core = admin.makeApiClient(CoreV1Api);
  const request = await core.createNamespacedServiceAccountToken({
    namespace: NAMESPACE,
    name: SERVICE_ACCOUNT,
    body: { spec: { audiences: [], expirationSeconds: 7 * 24 * 3600 } },
  });
  const token = request.status?.token;
  const caData = admin.getCurrentCluster()?.caData;
  if (token === undefined || caData === undefined) throw new Error("no token for the example ServiceAccount");
  return tokenKubeConfig(plane.server, Buffer.from(caData, "base64").toString("utf8"), `system:serviceaccount:${NAMESPACE}:${SERVICE_ACCOUNT}`, token);
}
