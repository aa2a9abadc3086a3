// The site's power devices, one or a share of one per machine: emulated ESPHome plugs and Shelly devices, one
// emulated Home Assistant, one real Redfish BMC emulator (sushy-tools). For each machine: what powers it in the
// machine simulator, its node entry in plugpool's config, and whether its power is on.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { V1Device } from "@kubernetes/client-node";
import { startHomeAssistantEmulator, type HomeAssistantEmulator } from "../home-assistant/emulator.ts";
import { lease, type Lease } from "../lease.ts";
import { pollingOutlet, type Outlet, type PowerSource } from "../machine-simulator.ts";
import { startPlugEmulator, type CallRecord, type EmulatedPlug, type Platform, type RestoreMode, type Version } from "../plug-emulator/index.ts";
import { startRedfish, type RunningRedfish } from "../redfish/index.ts";
import { startShellyEmulator, type EmulatedShelly } from "../shelly-emulator/index.ts";

/** The relay of every ESPHome plug of the site. */
export const RELAY = "Relay";

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
  /** The plug's relay state after a power loss (emulator default ALWAYS_OFF). */
  readonly restoreMode?: RestoreMode;
  /** The device has a power sensor ("Power" on a plug) and plugpool is configured to read it. */
  readonly powerSensor?: boolean;
  /** Power on, nothing ever registers. */
  readonly neverBoots?: boolean;
  /** The Node name (and providerID suffix) its kubelet registers, when not the machine's name. */
  readonly nodeName?: string;
  /** A DRA driver on the machine: the devices it publishes in a ResourceSlice once the Node registers. */
  readonly dra?: { readonly driver: string; readonly devices: readonly V1Device[] };
}

export interface DeviceOptions {
  /** Each plug behind an address of its own that can be pointed at another device (tests/harness/lease.ts). */
  readonly leases?: boolean;
  /** Called as each request reaches a machine's plug, before the plug acts on it. */
  readonly onPlugRequest?: (machine: string, record: Readonly<CallRecord>) => void;
}

/** The devices; their functions may be passed around on their own. */
export interface Devices {
  readonly plug: (machine: string) => EmulatedPlug;
  readonly shelly: (machine: string) => EmulatedShelly;
  /** The Redfish BMC of the machines on backend "redfish" (each machine is the system of its name). */
  readonly redfish: () => RunningRedfish;
  /** The Home Assistant of the machines on backend "home-assistant", and each one's object id in it. */
  readonly homeAssistant: () => { readonly hub: HomeAssistantEmulator; objectId(machine: string): string };
  /** The address plugpool is configured with for the machine's plug (with `leases`): it may be made to reach another plug. */
  readonly address: (machine: string) => Lease;
  /** What powers the machine in the simulator. */
  powerSource(machine: MachineSpec): PowerSource;
  /** The machine's entry among the nodes of plugpool's config. */
  configNode(machine: MachineSpec): Record<string, unknown>;
  /** Whether the machine's power is on, whatever switches it (for a BMC: as the simulator last saw it). */
  readonly powered: (machine: string) => boolean;
}

/** A machine's object id in Home Assistant: its name with "_" for "-". */
function objectId(machine: string): string {
  return machine.replaceAll("-", "_");
}

function found<T>(map: ReadonlyMap<string, T>, machine: string, what: string): T {
  const value = map.get(machine);
  if (value === undefined) throw new Error(`no ${what} for ${machine}`);
  return value;
}

/**
 * Starts every machine's device; their secrets (Home Assistant's token, the BMC's login) go into files in `dir`.
 * Each device's stop is pushed onto `cleanups`.
 */
export async function startDevices(
  machines: readonly MachineSpec[],
  dir: string,
  cleanups: (() => Promise<void> | void)[],
  options: DeviceOptions = {},
): Promise<Devices> {
  const plugs = new Map<string, EmulatedPlug>();
  const addresses = new Map<string, Lease>();
  const shellies = new Map<string, EmulatedShelly>();
  for (const m of machines) {
    if (m.backend === "shelly") {
      const device = await startShellyEmulator({ gen: 3, switches: [{ metered: m.powerSensor === true }] });
      shellies.set(m.name, device);
      cleanups.push(() => device.close());
    }
    if (m.backend !== undefined && m.backend !== "esphome") continue;
    const onRequest = options.onPlugRequest;
    const plug = await startPlugEmulator({
      ...(m.version && { version: m.version }),
      ...(m.platform && { platform: m.platform }),
      switches: [{ name: RELAY, ...(m.restoreMode && { restoreMode: m.restoreMode }), ...(m.powerSensor === true && { powerSensor: "Power" }) }],
      ...(onRequest && { onRequest: (record: Readonly<CallRecord>) => { onRequest(m.name, record); } }),
    });
    plugs.set(m.name, plug);
    cleanups.push(() => plug.close());
    if (options.leases !== true) continue;
    const address = await lease(plug.url);
    addresses.set(m.name, address);
    cleanups.push(() => address.close());
  }
  const plug = (machine: string): EmulatedPlug => found(plugs, machine, "ESPHome plug");
  const shelly = (machine: string): EmulatedShelly => found(shellies, machine, "Shelly device");

  const onHub = machines.filter((m) => m.backend === "home-assistant");
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

  const onBmc = machines.filter((m) => m.backend === "redfish");
  const bmc = onBmc.length === 0 ? undefined : await startRedfish({ systems: onBmc.map((m) => ({ id: m.name, power: "Off" })) });
  if (bmc !== undefined) cleanups.push(() => bmc.stop());
  const redfish = (): RunningRedfish => {
    if (bmc === undefined) throw new Error("no machine is on Redfish");
    return bmc;
  };
  const bmcLogin = { username: join(dir, "redfish-username"), password: join(dir, "redfish-password") };
  writeFileSync(bmcLogin.username, bmc?.username ?? "");
  writeFileSync(bmcLogin.password, bmc?.password ?? "");
  /** What the simulator last saw of each BMC-powered machine (the emulator's store is read asynchronously). */
  const bmcOutlets = new Map<string, Outlet>();

  return {
    plug,
    shelly,
    redfish,
    homeAssistant,
    address: (machine) => found(addresses, machine, "address"),
    powerSource: (m) => {
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
          return { plug: plug(m.name), switchName: RELAY };
      }
    },
    configNode: (m) => {
      switch (m.backend) {
        case "shelly":
          return { name: m.name, shelly: { url: shelly(m.name).url, switchId: 0, measure: m.powerSensor === true } };
        case "home-assistant": {
          const id = objectId(m.name);
          const sensor = m.powerSensor === true ? { powerSensor: `sensor.${id}` } : {};
          return { name: m.name, homeAssistant: { url: homeAssistant().hub.url, entity: `switch.${id}`, ...sensor, tokenFile } };
        }
        case "redfish":
          return {
            name: m.name,
            redfish: {
              url: redfish().url, system: m.name, caFile: redfish().caFile, usernameFile: bmcLogin.username, passwordFile: bmcLogin.password, gracefulShutdown: true,
            },
          };
        case "esphome":
        case undefined: {
          const url = addresses.get(m.name)?.url ?? plug(m.name).url;
          return { name: m.name, plug: { url, switch: RELAY, ...(m.powerSensor === true && { powerSensor: "Power" }) } };
        }
      }
    },
    powered: (machine) =>
      shellies.has(machine)
        ? shelly(machine).output(0)
        : plugs.has(machine)
          ? plug(machine).state(RELAY)
          : (bmcOutlets.get(machine)?.isOn() ?? homeAssistant().hub.stateOf(`switch.${objectId(machine)}`) === "on"),
  };
}
