// Child process of bench/fleet.ts: runs the emulated devices until the parent disconnects.
import { startPlugEmulator, type EmulatedPlug, type Fault } from "../tests/harness/plug-emulator/index.ts";
import type { DeviceSpec, FleetReply, FleetRequest } from "./fleet.ts";

let plugs: EmulatedPlug[] = [];

function faultOf(device: DeviceSpec, slowMs: number): Fault | undefined {
  switch (device.fault) {
    case undefined:
      return undefined;
    case "dead":
      return { kind: "timeout" }; // accepts the connection, never answers
    case "slow":
      return { kind: "slow", ms: slowMs };
  }
}

async function start(request: FleetRequest): Promise<FleetReply> {
  try {
    plugs = await Promise.all(
      request.devices.map(async (device) => {
        const plug = await startPlugEmulator({ version: "2026.7", platform: device.platform, switches: [{ name: "Relay" }] });
        plug.setState("Relay", device.on);
        const fault = faultOf(device, request.slowMs);
        if (fault) await plug.inject(fault);
        return plug;
      }),
    );
    return { urls: plugs.map((p) => p.url) };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

process.once("message", (message) => {
  void start(message as FleetRequest).then((reply) => process.send?.(reply));
});

process.once("disconnect", () => {
  void Promise.all(plugs.map((p) => p.close())).finally(() => process.exit(0));
});
