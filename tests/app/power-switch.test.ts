// The composed PowerSwitch routes each machine's calls to its own backend, and each backend's switch is made once,
// with the timeout of its kind of device.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { BackendOptions, BackendSwitch, PowerBackend } from "../../src/adapters/power-backend.ts";
import { createPowerSwitch } from "../../src/app/power/power-switch.ts";
import type { PowerControl } from "../../src/domain/index.ts";

/** A backend whose switch answers reads with its own name and the address asked, and notes each switch it made. */
function backend(name: string, defaultTimeoutMs: number, made: { name: string; options: BackendOptions }[]): PowerBackend<unknown> {
  return {
    name,
    section: name,
    defaultTimeoutMs,
    schema: {},
    parse: () => undefined,
    create(options: BackendOptions): BackendSwitch<unknown> {
      made.push({ name, options });
      const fail = () => Promise.reject(new Error("not used here"));
      return {
        read: (address) => Promise.resolve({ on: address === `${name}-on` }),
        turnOn: fail,
        turnOff: fail,
        probe: fail,
      };
    },
  };
}

const control = (key: string): PowerControl => ({ backend: key.split(":")[0] ?? "", key, label: key, measuresWatts: false });

describe("createPowerSwitch()", () => {
  it("makes each backend's switch once, with the timeout given for its kind, else the backend's own default", async () => {
    const made: { name: string; options: BackendOptions }[] = [];
    const controls = new Map([
      ["bmc:1", { backend: "bmc", address: "bmc-on" }],
      ["bmc:2", { backend: "bmc", address: "bmc-off" }],
      ["plug:1", { backend: "plug", address: "plug-on" }],
    ]);
    const power = createPowerSwitch(controls, new Map([["bmc", 12_000]]), [backend("plug", 2_000, made), backend("bmc", 10_000, made)]);
    assert.deepEqual(await power.read(control("bmc:1")), { on: true });
    assert.deepEqual(await power.read(control("bmc:2")), { on: false });
    assert.deepEqual(await power.read(control("plug:1")), { on: true });
    assert.deepEqual(made, [
      { name: "bmc", options: { timeoutMs: 12_000 } },
      { name: "plug", options: { timeoutMs: 2_000 } },
    ]);
  });
});
