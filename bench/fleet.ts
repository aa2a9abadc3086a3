// The emulated plugs, one ESPHome device per machine, in a process of their own: 500 HTTP servers answering
// a Refresh would otherwise share an event loop with the client whose latencies are being measured.
import { join } from "node:path";
import type { Platform } from "../tests/harness/plug-emulator/index.ts";
import { forkChild } from "./child.ts";

export type PlugFault = "dead" | "slow";

export interface DeviceSpec {
  readonly platform: Platform;
  /** Relay state at start: on for machines whose Node is registered. */
  readonly on: boolean;
  readonly fault?: PlugFault;
}

/** Parent → child. */
export interface FleetRequest {
  readonly devices: readonly DeviceSpec[];
  readonly slowMs: number;
}

/** Child → parent. */
export type FleetReply = { readonly urls: readonly string[] } | { readonly error: string };

export interface Fleet {
  /** Base URL of each device, in the order of the specs. */
  readonly urls: readonly string[];
  close(): Promise<void>;
}

/** Starts the devices; the child exits when closed or when this process goes away (IPC disconnect). */
export async function startFleet(request: FleetRequest): Promise<Fleet> {
  const child = await forkChild<FleetReply>(join(import.meta.dirname, "fleet-process.ts"), request);
  if ("error" in child.reply) {
    await child.close();
    throw new Error(`plug fleet failed to start: ${child.reply.error}`);
  }
  return { urls: child.reply.urls, close: child.close };
}
