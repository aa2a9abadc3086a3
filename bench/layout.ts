// The simulated site for N machines: groups of up to 100, half the machines registered (Ready Node, plug
// on), one in ten plugs faulty (dead or slow, alternately), ESP32 and ESP8266 devices alternately. Derived
// from the index only, so every run and every size has the same shape.
import type { Platform } from "../tests/harness/plug-emulator/index.ts";
import { plugpoolConfig } from "../tests/harness/site/index.ts";
import type { PlugFault } from "./fleet.ts";

export const GROUP_SIZE = 100;
export const PLUG_TIMEOUT = "1s";
export const PLUG_TIMEOUT_MS = 1000;
export const SLOW_PLUG_MS = 300;
/** The relay's read, as plugpool spells it for these devices (entity name). */
export const RELAY_PATH = "/switch/Relay";

export interface BenchMachine {
  readonly name: string;
  readonly group: string;
  readonly registered: boolean;
  readonly platform: Platform;
  readonly fault?: PlugFault;
}

export interface Layout {
  readonly machines: readonly BenchMachine[];
  readonly groups: readonly string[];
  readonly labels: (group: string) => Readonly<Record<string, string>>;
}

function faultAt(i: number): PlugFault | undefined {
  // One machine in each block of ten: dead and slow alternate by block, registered (even index) and
  // unregistered (odd) alternate by pair of blocks: 4 dead, 14 slow, 29 dead, 39 slow, 44 dead…
  const block = Math.floor(i / 10);
  if (i % 10 !== (Math.floor(block / 2) % 2 === 0 ? 4 : 9)) return undefined;
  return block % 2 === 0 ? "dead" : "slow";
}

export function layout(count: number): Layout {
  const groups = Array.from({ length: Math.ceil(count / GROUP_SIZE) }, (_, g) => `group-${g + 1}`);
  const machines = Array.from({ length: count }, (_, i): BenchMachine => {
    const fault = faultAt(i);
    return {
      name: `machine-${String(i).padStart(3, "0")}`,
      group: groups[Math.floor(i / GROUP_SIZE)] ?? "",
      registered: i % 2 === 0,
      platform: i % 4 < 2 ? "esp32" : "esp8266",
      ...(fault && { fault }),
    };
  });
  return { machines, groups, labels: (group) => ({ "example.com/pool": group }) };
}

/** The configuration file plugpool is started with (gRPC and ops on free loopback ports). */
export function configYaml(site: Layout, urls: readonly string[]): string {
  const nodes = (group: string): Record<string, unknown>[] =>
    site.machines.flatMap((m, i) => (m.group === group ? [{ name: m.name, plug: { url: urls[i] ?? "", switch: "Relay" } }] : []));
  return plugpoolConfig({
    groups: site.groups.map((group) => ({ id: group, labels: site.labels(group), nodes: nodes(group) })),
    deviceTimeout: PLUG_TIMEOUT,
  });
}

export function summary(site: Layout): { machines: number; groups: number; registered: number; dead: number; slow: number } {
  const count = (p: (m: BenchMachine) => boolean): number => site.machines.filter(p).length;
  return {
    machines: site.machines.length,
    groups: site.groups.length,
    registered: count((m) => m.registered),
    dead: count((m) => m.fault === "dead"),
    slow: count((m) => m.fault === "slow"),
  };
}
