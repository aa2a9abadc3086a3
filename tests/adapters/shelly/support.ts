// Shared helpers of the Shelly adapter tests: emulated devices that close with the test and the address of
// one of their switches.
import type { TestContext } from "node:test";
import { Secret } from "../../../src/adapters/secret.ts";
import type { ShellyAddress } from "../../../src/adapters/shelly/shelly-power-switch.ts";
import { startShellyEmulator, type EmulatedShelly, type ShellyEmulatorOptions } from "../../harness/shelly-emulator/index.ts";

export { acceptAny, allowCut, assertNoSecret, assertPlugError, expectDevice, timed } from "../esphome/support.ts";

export async function emulate(t: TestContext, opts: ShellyEmulatorOptions = {}): Promise<EmulatedShelly> {
  const device = await startShellyEmulator(opts);
  t.after(() => device.close());
  return device;
}

export function addressOf(device: EmulatedShelly, switchId = 0, more: { measure?: boolean; password?: string } = {}): ShellyAddress {
  const { host } = new URL(device.url);
  return {
    url: device.url,
    device: host,
    switchId,
    measure: more.measure ?? false,
    ...(more.password === undefined ? {} : { password: new Secret(more.password) }),
  };
}

/** The RPC methods the device saw, in order, with the status each got ("-" for none). */
export function rpcLog(device: EmulatedShelly): string[] {
  return device.calls.map((c) => `${c.rpc} ${c.status === undefined ? "-" : String(c.status)}`);
}
