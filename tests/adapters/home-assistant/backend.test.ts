// A node's homeAssistant section as the configuration loader reads it: what it becomes, and every problem
// reported at its path without the token.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import type { HomeAssistantEntity } from "../../../src/adapters/home-assistant/entity.ts";
import { createPowerSwitch } from "../../../src/app/power/power-switch.ts";
import { startHomeAssistantEmulator } from "../../harness/home-assistant/emulator.ts";
import { config, group, issuesOf, load } from "../../app/fixtures/config-builders.ts";
import { acceptAny } from "./support.ts";

const TOKEN = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.c2VjcmV0LXBheWxvYWQ.s1gn4tur3";
const env = { PLUGPOOL_HOME_ASSISTANT_TOKEN: TOKEN };

function haNode(name: string, section: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, homeAssistant: { url: "http://homeassistant.local:8123", entity: `switch.${name.replace(/-/g, "_")}`, ...section } };
}

function entities(doc: Record<string, unknown>, environment: Record<string, string> = env): HomeAssistantEntity[] {
  const loaded = load(doc, environment);
  return loaded.pool.groups.flatMap((g) => g.machines.map((m) => {
    const resolved = loaded.powerControls.get(m.power.key);
    assert.equal(resolved?.backend, "home-assistant");
    return resolved.address as HomeAssistantEntity;
  }));
}

/** The one machine's entity. */
function entityOf(doc: Record<string, unknown>, environment: Record<string, string> = env): HomeAssistantEntity {
  const [entity, ...more] = entities(doc, environment);
  assert.ok(entity !== undefined && more.length === 0, "one machine");
  return entity;
}

describe("homeAssistant section", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "plugpool-ha-config-"));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("makes a power control of the entity, the token kept as a secret", () => {
    const doc = config([group("gpu", [haNode("gpu-1", { url: "HTTP://HomeAssistant.local:8123/", powerSensor: "sensor.gpu_1_power" })])]);
    const loaded = load(doc, env);
    const machine = loaded.pool.groups[0]?.machines[0];
    assert.deepEqual(machine?.power, {
      backend: "home-assistant",
      key: "home-assistant homeassistant.local:8123 switch.gpu_1",
      label: "Home Assistant http://homeassistant.local:8123 entity switch.gpu_1",
      measuresWatts: true,
    });
    const entity = entityOf(doc);
    assert.equal(entity.url, "http://homeassistant.local:8123");
    assert.equal(entity.powerSensor, "sensor.gpu_1_power");
    assert.equal(entity.token.reveal(), TOKEN);
    assert.ok(!inspect(loaded, { depth: Infinity }).includes(TOKEN), "the token shows nowhere in the loaded configuration");
  });

  it("takes an input_number as the sensor", () => {
    const entity = entityOf(config([group("g", [haNode("a", { powerSensor: "input_number.box_watts" })])]));
    assert.equal(entity.powerSensor, "input_number.box_watts");
  });

  it("refuses an input_boolean as the switch: its state is what was last set, not the machine's power", () => {
    assert.deepEqual(issuesOf(config([group("g", [haNode("a", { entity: "input_boolean.box" })])]), env), [
      "nodeGroups[0].nodes[0].homeAssistant.entity: must be the entity id of a switch.* entity (e.g. switch.gpu_box); an input_boolean.* helper holds what was last set, not whether the machine has power",
    ]);
  });

  it("reads the token from tokenFile, before the environment, without its trailing newline", () => {
    const file = join(dir, "token");
    writeFileSync(file, "file-token-value\n");
    const entity = entityOf(config([group("g", [haNode("a", { tokenFile: file })])]), { PLUGPOOL_HOME_ASSISTANT_TOKEN: "other" });
    assert.equal(entity.token.reveal(), "file-token-value");
  });

  it("refuses a node without a token, naming where one goes", () => {
    assert.deepEqual(issuesOf(config([group("g", [haNode("a")])]), {}), [
      "nodeGroups[0].nodes[0].homeAssistant: needs a Home Assistant token: set tokenFile, or the environment variable PLUGPOOL_HOME_ASSISTANT_TOKEN",
    ]);
  });

  it("refuses a token file that cannot be read or does not hold one token, showing none of it", () => {
    const spaced = join(dir, "spaced");
    writeFileSync(spaced, `${TOKEN} ${TOKEN}\n`);
    const issues = issuesOf(config([group("g", [haNode("a", { tokenFile: join(dir, "missing") }), haNode("b", { tokenFile: spaced })])]), env);
    assert.deepEqual(issues, [
      "nodeGroups[0].nodes[0].homeAssistant.tokenFile: must be the path of a readable file (no such file)",
      `nodeGroups[0].nodes[1].homeAssistant.tokenFile: ${spaced} does not hold one token: it is empty or has spaces, line breaks or other characters a token never has`,
    ]);
    const broken = "line\nbreak";
    const fromEnv = issuesOf(config([group("g", [haNode("a")])]), { PLUGPOOL_HOME_ASSISTANT_TOKEN: broken });
    assert.deepEqual(fromEnv, ["PLUGPOOL_HOME_ASSISTANT_TOKEN: does not hold one token: it has spaces, line breaks or other characters a token never has"]);
  });

  it("refuses entities of other domains and malformed ids, at their paths", () => {
    const issues = issuesOf(config([group("g", [
      haNode("a", { entity: "light.desk" }),
      haNode("b", { entity: "switch.Box" }),
      haNode("c", { powerSensor: "switch.c_power" }),
      haNode("d", { entity: "switch.d__x", powerSensor: "sensor._w" }),
    ])]), env);
    const entity = "must be the entity id of a switch.* entity (e.g. switch.gpu_box)";
    const sensor = "must be the entity id of a sensor.* or input_number.* entity (e.g. sensor.gpu_box_power)";
    assert.deepEqual(issues, [
      `nodeGroups[0].nodes[0].homeAssistant.entity: ${entity}`,
      `nodeGroups[0].nodes[1].homeAssistant.entity: ${entity}`,
      `nodeGroups[0].nodes[2].homeAssistant.powerSensor: ${sensor}`,
      `nodeGroups[0].nodes[3].homeAssistant.entity: ${entity}`,
      `nodeGroups[0].nodes[3].homeAssistant.powerSensor: ${sensor}`,
    ]);
  });

  it("refuses a URL with credentials, a path, or no scheme, repeating none of it", () => {
    const issues = issuesOf(config([group("g", [
      haNode("a", { url: `http://user:${TOKEN}@ha.local:8123` }),
      haNode("b", { url: "http://ha.local:8123/lovelace" }),
      haNode("c", { url: "ha.local:8123" }),
    ])]), env);
    assert.equal(issues.length, 3);
    assert.match(issues[0] ?? "", /^nodeGroups\[0\]\.nodes\[0\]\.homeAssistant\.url: must be an http:\/\/ or https:\/\/ URL without credentials: put the token in tokenFile or PLUGPOOL_HOME_ASSISTANT_TOKEN instead$/);
    assert.match(issues[1] ?? "", /^nodeGroups\[0\]\.nodes\[1\]\.homeAssistant\.url: must be the device's base URL/);
    assert.match(issues[2] ?? "", /^nodeGroups\[0\]\.nodes\[2\]\.homeAssistant\.url: must be an http/);
    assert.ok(issues.every((i) => !i.includes(TOKEN)));
  });

  it("refuses two nodes on one entity, however the instance's URL is spelled", () => {
    const issues = issuesOf(config([group("g", [
      haNode("a", { entity: "switch.box" }),
      haNode("b", { url: "http://HOMEASSISTANT.local.:8123/", entity: "switch.box" }),
    ])]), env);
    assert.equal(issues.length, 1);
    assert.match(issues[0] ?? "", /^nodeGroups\[0\]\.nodes\[1\]\.homeAssistant: is the same power control as nodeGroups\[0\]\.nodes\[0\]/);
  });

  it("takes one entity name on two instances as two controls", () => {
    const found = entities(config([group("g", [
      haNode("a", { entity: "switch.box" }),
      haNode("b", { url: "http://other-ha.local:8123", entity: "switch.box" }),
    ])]));
    assert.equal(found.length, 2);
  });

  it("refuses two nodes reading one power sensor", () => {
    const issues = issuesOf(config([group("g", [
      haNode("a", { powerSensor: "sensor.strip_power" }),
      haNode("b", { powerSensor: "sensor.strip_power" }),
    ])]), env);
    assert.deepEqual(issues, [
      "nodeGroups[0].nodes[1].homeAssistant.powerSensor: is also the power sensor of nodeGroups[0].nodes[0].homeAssistant; each machine needs its own",
    ]);
  });

  it("refuses unknown keys and a node with both a plug and an entity", () => {
    const both = { ...haNode("b"), plug: { url: "http://b.plug.example", switch: "Relay" } };
    const issues = issuesOf(config([group("g", [haNode("a", { token: TOKEN }), both])]), env);
    assert.deepEqual(issues.map((i) => i.replace(TOKEN, "<token>")), [
      "nodeGroups[0].nodes[0].homeAssistant.token: unknown key (did you mean tokenFile?)",
      "nodeGroups[0].nodes[1]: sets plug and homeAssistant; a machine has one power control",
    ]);
  });

  it("is routed to from a loaded configuration: read, switch and probe through plugpool's power switch", async () => {
    const ha = await startHomeAssistantEmulator({ switches: ["gpu_1"], sensors: { gpu_1_power: 250 } });
    try {
      const loaded = load(config([group("gpu", [haNode("gpu-1", { url: ha.url, powerSensor: "sensor.gpu_1_power" })])]), { PLUGPOOL_HOME_ASSISTANT_TOKEN: ha.token });
      const machine = loaded.pool.groups[0]?.machines[0];
      assert.ok(machine !== undefined);
      const power = createPowerSwitch(loaded.powerControls, loaded.deviceTimeoutsMs);
      assert.deepEqual(await power.read(machine.power), { on: false, watts: 250 });
      assert.deepEqual(await power.turnOn(machine.power, { device: acceptAny }), { on: true });
      assert.deepEqual(await power.probe(machine.power), { state: "on", watts: 250, detail: "Home Assistant 2025.4.4, switch.turn_on/turn_off" });
      assert.deepEqual(ha.serviceCalls(), ["switch.turn_on switch.gpu_1"]);
    } finally {
      await ha.stop();
    }
  });
});
