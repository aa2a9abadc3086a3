// The emulator answers as the real Home Assistant does: the same cases, with the same expected answers, run
// against both, for everything the Home Assistant power backend uses (status codes, body shapes, tokens,
// unknown and unavailable entities, which service acts on which domain's entities).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { HomeAssistantBackstage, HomeAssistantSetup } from "../../harness/home-assistant/backstage.ts";
import { startHomeAssistantEmulator } from "../../harness/home-assistant/emulator.ts";
import { homeAssistantMissing, startHomeAssistant } from "../../harness/home-assistant/index.ts";

const setup: HomeAssistantSetup = {
  switches: ["read", "service", "idempotent", "helper", "generic", "domain", "away", "behind"],
  assumed: ["guess"],
  sensors: { watts: 42, watts_away: 7 },
};

interface Answer {
  readonly status: number;
  readonly type: string;
  readonly body: unknown;
}

const time = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00$|^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$/;

/** Timestamps and ids replaced by their kind, so that answers of both compare as values. */
function normalized(value: unknown, key = ""): unknown {
  if (Array.isArray(value)) return value.map((v) => normalized(v));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalized(v, k)]));
  }
  if (typeof value === "string" && time.test(value)) return "<time>";
  if (typeof value === "string" && key === "id") return "<id>";
  if (typeof value === "string" && key === "user_id") return "<user>";
  return value;
}

function conformance(name: string, start: () => Promise<HomeAssistantBackstage>, skip?: string): void {
  describe(name, { skip }, () => {
    let ha: HomeAssistantBackstage;
    before(async () => {
      ha = await start();
    });
    after(async () => {
      await ha.stop();
    });

    async function request(method: "GET" | "POST", path: string, body?: unknown, token: string | null = ha.token): Promise<Answer> {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (token !== null) headers.authorization = `Bearer ${token}`;
      const answer = await fetch(`${ha.url}${path}`, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(10_000),
      });
      const type = (answer.headers.get("content-type") ?? "").split(";")[0] ?? "";
      const text = await answer.text();
      return { status: answer.status, type, body: type === "application/json" ? normalized(JSON.parse(text)) : text };
    }
    const stateOf = async (entityId: string): Promise<unknown> => ((await request("GET", `/api/states/${entityId}`)).body as { state?: unknown }).state;
    const changes = (answer: Answer): string[] => (answer.body as { entity_id: string; state: string }[]).map((s) => `${s.entity_id}=${s.state}`);

    it("answers GET /api/ with the token", async () => {
      assert.deepEqual(await request("GET", "/api/"), { status: 200, type: "application/json", body: { message: "API running." } });
    });

    it("answers 401 in plain text without a token, with a wrong one, for reads and service calls", async () => {
      const unauthorized = { status: 401, type: "text/plain", body: "401: Unauthorized" };
      assert.deepEqual(await request("GET", "/api/", undefined, null), unauthorized);
      assert.deepEqual(await request("GET", "/api/states/switch.read", undefined, `${ha.token}x`), unauthorized);
      assert.deepEqual(await request("POST", "/api/services/switch/turn_on", { entity_id: "switch.read" }, "not-a-token"), unauthorized);
      assert.equal(await stateOf("switch.read"), "off", "the refused call changed nothing");
    });

    it("tells its version and that it runs in GET /api/config", async () => {
      const answer = await request("GET", "/api/config");
      assert.equal(answer.status, 200);
      const { version, state } = answer.body as { version: unknown; state: unknown };
      assert.equal(state, "RUNNING");
      assert.equal(version, "2025.4.4");
    });

    it("answers an entity's state as an object with its attributes and times", async () => {
      const context = { id: "<id>", parent_id: null, user_id: null };
      const times = { last_changed: "<time>", last_reported: "<time>", last_updated: "<time>" };
      assert.deepEqual(await request("GET", "/api/states/switch.read"), {
        status: 200, type: "application/json",
        body: { entity_id: "switch.read", state: "off", attributes: { friendly_name: "read" }, ...times, context },
      });
      assert.deepEqual(await request("GET", "/api/states/input_boolean.read"), {
        status: 200, type: "application/json",
        body: { entity_id: "input_boolean.read", state: "off", attributes: { editable: false, friendly_name: "read" }, ...times, context },
      });
      assert.deepEqual(await request("GET", "/api/states/sensor.watts"), {
        status: 200, type: "application/json",
        body: {
          entity_id: "sensor.watts", state: "42.0",
          attributes: { state_class: "measurement", unit_of_measurement: "W", device_class: "power", friendly_name: "watts" },
          ...times, context,
        },
      });
      const number = await request("GET", "/api/states/input_number.watts");
      assert.equal((number.body as { state: unknown }).state, "42.0");
      assert.equal((number.body as { attributes: { unit_of_measurement: unknown } }).attributes.unit_of_measurement, "W");
    });

    it("answers 404 with a JSON message for an unknown entity", async () => {
      assert.deepEqual(await request("GET", "/api/states/switch.nowhere"), {
        status: 404, type: "application/json", body: { message: "Entity not found." },
      });
    });

    it("answers a switch's turn_on with the states it changed, the switch's among them", async () => {
      const answer = await request("POST", "/api/services/switch/turn_on", { entity_id: "switch.service" });
      assert.equal(answer.status, 200);
      assert.deepEqual(changes(answer), ["input_boolean.service=on", "switch.service=on"]);
      const entry = (answer.body as Record<string, unknown>[])[1];
      assert.deepEqual(Object.keys(entry ?? {}).sort(), ["attributes", "context", "entity_id", "last_changed", "last_reported", "last_updated", "state"]);
      assert.deepEqual((entry as { context: unknown }).context, { id: "<id>", parent_id: null, user_id: "<user>" });
      assert.equal(await stateOf("switch.service"), "on");
      assert.deepEqual(changes(await request("POST", "/api/services/switch/turn_off", { entity_id: "switch.service" })),
        ["input_boolean.service=off", "switch.service=off"]);
      assert.equal(await stateOf("switch.service"), "off");
    });

    it("answers [] to a command that changes nothing, the entity already being so", async () => {
      await request("POST", "/api/services/switch/turn_on", { entity_id: "switch.idempotent" });
      assert.deepEqual(await request("POST", "/api/services/switch/turn_on", { entity_id: "switch.idempotent" }),
        { status: 200, type: "application/json", body: [] });
      assert.equal(await stateOf("switch.idempotent"), "on");
    });

    it("switches an input_boolean with input_boolean.turn_on and with homeassistant.turn_off", async () => {
      assert.deepEqual(changes(await request("POST", "/api/services/input_boolean/turn_on", { entity_id: "input_boolean.helper" })),
        ["input_boolean.helper=on", "switch.helper=on"]);
      assert.deepEqual(changes(await request("POST", "/api/services/homeassistant/turn_off", { entity_id: "input_boolean.helper" })),
        ["input_boolean.helper=off", "switch.helper=off"]);
      assert.equal(await stateOf("input_boolean.helper"), "off");
    });

    it("switches through homeassistant.turn_on as through the entity's own domain", async () => {
      assert.deepEqual(changes(await request("POST", "/api/services/homeassistant/turn_on", { entity_id: "input_boolean.generic" })),
        ["input_boolean.generic=on", "switch.generic=on"]);
      assert.deepEqual(changes(await request("POST", "/api/services/homeassistant/turn_off", { entity_id: "switch.generic" })),
        ["input_boolean.generic=off", "switch.generic=off"]);
    });

    it("leaves another domain's entity alone: switch.turn_on of an input_boolean answers [] and does nothing", async () => {
      assert.deepEqual(await request("POST", "/api/services/switch/turn_on", { entity_id: "input_boolean.domain" }),
        { status: 200, type: "application/json", body: [] });
      assert.equal(await stateOf("input_boolean.domain"), "off");
    });

    it("answers [] to a service call naming an unknown entity", async () => {
      assert.deepEqual(await request("POST", "/api/services/switch/turn_off", { entity_id: "switch.nowhere" }),
        { status: 200, type: "application/json", body: [] });
    });

    it("answers 400 to an unknown service and to a body that is not an object", async () => {
      assert.deepEqual(await request("POST", "/api/services/nowhere/turn_on", { entity_id: "switch.domain" }),
        { status: 400, type: "text/plain", body: "400: Bad Request" });
      assert.deepEqual(await request("POST", "/api/services/switch/turn_on", "switch.domain"),
        { status: 400, type: "text/plain", body: "400: Bad Request" });
      assert.equal(await stateOf("switch.domain"), "off");
    });

    it("shows an entity whose device is unreachable as unavailable, and skips it in service calls", async () => {
      await ha.setAvailable("away", false);
      assert.equal(await stateOf("switch.away"), "unavailable");
      assert.deepEqual(await request("POST", "/api/services/switch/turn_on", { entity_id: "switch.away" }),
        { status: 200, type: "application/json", body: [] });
      assert.equal(await stateOf("input_boolean.away"), "off", "the unreachable switch was not switched");
      await ha.setAvailable("away", true);
      assert.equal(await stateOf("switch.away"), "off");
      await ha.setAvailable("watts_away", false);
      const sensor = await request("GET", "/api/states/sensor.watts_away");
      assert.equal((sensor.body as { state: unknown }).state, "unavailable");
      assert.equal((sensor.body as { attributes: { unit_of_measurement: unknown } }).attributes.unit_of_measurement, "W");
    });

    it("marks an optimistic switch's state as assumed, and keeps it when its helper changes behind its back", async () => {
      const guess = (await request("GET", "/api/states/switch.guess")).body as { state: unknown; attributes: unknown };
      assert.equal(guess.state, "off");
      assert.deepEqual(guess.attributes, { assumed_state: true, friendly_name: "guess" });
      assert.deepEqual(changes(await request("POST", "/api/services/switch/turn_on", { entity_id: "switch.guess" })),
        ["input_boolean.guess=on", "switch.guess=on"]);
      await ha.setSwitch("guess", false);
      assert.equal(await stateOf("input_boolean.guess"), "off");
      assert.equal(await stateOf("switch.guess"), "on", "what it was last asked, not what its helper is");
    });

    it("shows changes made behind plugpool's back", async () => {
      await ha.setSwitch("behind", true);
      assert.equal(await stateOf("switch.behind"), "on");
      assert.equal(await stateOf("input_boolean.behind"), "on");
      await ha.setWatts("watts", 1234.5);
      assert.equal(await stateOf("sensor.watts"), "1234.5");
      await ha.setWatts("watts", 0);
      assert.equal(await stateOf("sensor.watts"), "0.0");
    });
  });
}

conformance("the Home Assistant emulator", () => startHomeAssistantEmulator(setup));
conformance("the real Home Assistant", () => startHomeAssistant(setup), homeAssistantMissing());
