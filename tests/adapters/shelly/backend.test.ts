// The Shelly backend in the configuration: its `shelly` section parsed and checked with paths, the password's
// sources, the same-device rules, and a loaded configuration driving an emulated device end to end.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { describe, it, type TestContext } from "node:test";
import type { ShellyAddress } from "../../../src/adapters/shelly/shelly-power-switch.ts";
import { shellyBackend } from "../../../src/adapters/shelly/backend.ts";
import { createPowerSwitch } from "../../../src/app/power/power-switch.ts";
import type { AppConfig } from "../../../src/app/config/index.ts";
import { config, group, issuesOf, load } from "../../app/fixtures/config-builders.ts";
import { acceptAny, allowCut, emulate } from "./support.ts";

type Fields = Record<string, unknown>;

const shellyNode = (name: string, shelly: Fields): Fields => ({ name, shelly });

function tempFile(t: TestContext, content: string): string {
  const dir = mkdtempSync(join(tmpdir(), "plugpool-shelly-"));
  t.after(() => { rmSync(dir, { recursive: true, force: true }); });
  const file = join(dir, "password");
  writeFileSync(file, content);
  return file;
}

function addresses(loaded: AppConfig): ShellyAddress[] {
  return loaded.pool.groups.flatMap((g) => g.machines.map((m) => loaded.powerControls.get(m.power.key)?.address as ShellyAddress));
}

describe("the shelly section", () => {
  it("loads with switch 0, no measuring and no password by default", () => {
    const loaded = load(config([group("workers", [shellyNode("worker-1", { url: "http://192.168.1.52/" })])]));
    const machine = loaded.pool.groups[0]?.machines[0];
    assert.deepEqual(machine?.power, { backend: "shelly", key: "shelly 192.168.1.52 0", label: "Shelly http://192.168.1.52 switch 0", measuresWatts: false });
    assert.deepEqual(addresses(loaded), [{ url: "http://192.168.1.52", device: "192.168.1.52", switchId: 0, measure: false }]);
  });

  it("reads the password from its file (without the trailing newline), else from PLUGPOOL_SHELLY_PASSWORD", (t) => {
    const file = tempFile(t, "from-the-file\n");
    const env = { PLUGPOOL_SHELLY_PASSWORD: "from-the-env" };
    const loaded = load(
      config([group("workers", [shellyNode("a", { url: "http://a.example", passwordFile: file, measure: true }), shellyNode("b", { url: "http://b.example", switchId: 1 })])]),
      env,
    );
    const [a, b] = addresses(loaded);
    assert.equal(a?.password?.reveal(), "from-the-file");
    assert.equal(b?.password?.reveal(), "from-the-env");
    assert.equal(loaded.pool.groups[0]?.machines[0]?.power.measuresWatts, true);
    const printed = JSON.stringify(addresses(loaded)) + inspect(addresses(loaded), { depth: 5 });
    assert.ok(!printed.includes("from-the"), printed);
  });

  it("takes an empty PLUGPOOL_SHELLY_PASSWORD as none", () => {
    const [address] = addresses(load(config([group("workers", [shellyNode("a", { url: "http://a.example" })])]), { PLUGPOOL_SHELLY_PASSWORD: "" }));
    assert.equal(address?.password, undefined);
  });

  it("reports every problem with its path, never repeating a URL's credentials", (t) => {
    const file = tempFile(t, "pw");
    const doc = config([
      group("workers", [
        shellyNode("a", { url: "http://admin:hunter2@a.example" }),
        shellyNode("b", { url: "http://b.example", passwordFile: "/nonexistent/plugpool/pw" }),
        shellyNode("c", { url: "http://c.example", switchId: -1, relay: 2 }),
        { name: "d", shelly: { url: "http://d.example" }, plug: { url: "http://d.example", switch: "Relay" } },
        shellyNode("e", { url: "http://e.example", switchId: 0 }),
        shellyNode("f", { url: "HTTP://E.example:80", switchId: 0, passwordFile: file }),
      ]),
    ]);
    const issues = issuesOf(doc);
    assert.deepEqual(issues, [
      "nodeGroups[0].nodes[0].shelly.url: must be an http:// or https:// URL without credentials: set passwordFile or PLUGPOOL_SHELLY_PASSWORD instead",
      "nodeGroups[0].nodes[1].shelly.passwordFile: must be the path of a readable file (no such file)",
      "nodeGroups[0].nodes[2].shelly.switchId: must not be negative (found -1)",
      "nodeGroups[0].nodes[2].shelly.relay: unknown key (expected one of url, switchId, measure, passwordFile)",
      "nodeGroups[0].nodes[3]: sets plug and shelly; a machine has one power control",
      "nodeGroups[0].nodes[5].shelly: is the same power control as nodeGroups[0].nodes[4].shelly (Shelly http://e.example switch 0, on device e.example); each machine needs its own",
      `nodeGroups[0].nodes[5].shelly.passwordFile: differs from that of nodeGroups[0].nodes[4].shelly, on the same device e.example; a device has one password, so name the same file (or none) for both`,
    ]);
    assert.ok(issues.every((i) => !i.includes("hunter2")));
  });

  it("lets several switches of one device power several machines", () => {
    const loaded = load(config([group("workers", [0, 1, 2, 3].map((id) => shellyNode(`w${id}`, { url: "http://pro4pm.example", switchId: id })))]));
    assert.deepEqual(addresses(loaded).map((a) => `${a.device} ${a.switchId}`), ["pro4pm.example 0", "pro4pm.example 1", "pro4pm.example 2", "pro4pm.example 3"]);
  });

  it("drives the device a loaded configuration names, and probes it for doctor", async (t) => {
    const d = await emulate(t, { gen: 3, password: "pw-3", switches: [{}, { output: true }] });
    d.setDraw(1, 180);
    const loaded = load(config([group("workers", [shellyNode("w1", { url: d.url, switchId: 1, measure: true })])]), { PLUGPOOL_SHELLY_PASSWORD: "pw-3" });
    const power = createPowerSwitch(loaded.powerControls, loaded.deviceTimeoutsMs);
    const control = loaded.pool.groups[0]?.machines[0]?.power;
    assert.ok(control);
    assert.deepEqual(await power.read(control), { on: true, watts: 180 });
    assert.deepEqual(await power.turnOff(control, allowCut, { device: acceptAny }), { on: false, watts: 0 });
    assert.equal(d.output(1), false);
    assert.deepEqual(await power.probe(control), { state: "off", watts: 0, detail: "Gen3 S3SW-002P16EU firmware 2.0.1; auth on", identity: { id: `shelly ${d.id} mac ${d.mac}` } });
  });

  it("describes every key of its schema and states the defaults", () => {
    const properties = (shellyBackend.schema as { properties: Record<string, { description: string; default?: unknown }> }).properties;
    for (const [key, property] of Object.entries(properties)) {
      assert.ok(property.description.length > 20, key);
      if (property.default !== undefined) assert.ok(property.description.includes(`Default ${JSON.stringify(property.default)}`), key);
    }
  });
});
