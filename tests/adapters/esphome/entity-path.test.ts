import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createUrlStyleMemory, entityPath, objectIdOf } from "../../../src/adapters/esphome/entity-path.ts";

describe("objectIdOf()", () => {
  // The examples of ESPHome's object_id derivation (sanitize(snake_case(name))).
  it("lower-cases a plain name", () => {
    assert.equal(objectIdOf("Relay"), "relay");
  });

  it("turns spaces into underscores", () => {
    assert.equal(objectIdOf("Living Room Light"), "living_room_light");
  });

  it("turns every other character outside [a-z0-9_-] into an underscore", () => {
    assert.equal(objectIdOf("Plug #1 (Kitchen)"), "plug__1__kitchen_");
  });

  it("keeps hyphens and underscores", () => {
    assert.equal(objectIdOf("Outlet-2_b"), "outlet-2_b");
  });

  it("turns a plus into an underscore", () => {
    assert.equal(objectIdOf("Relay+1"), "relay_1");
  });
});

describe("entityPath()", () => {
  it("percent-encodes a space as %20 in the name form", () => {
    assert.equal(entityPath("switch", "Living Room", "name"), "/switch/Living%20Room");
  });

  it("percent-encodes a plus as %2B, since both backends decode + as a space", () => {
    assert.equal(entityPath("switch", "Relay +1", "name"), "/switch/Relay%20%2B1");
  });

  it("encodes a slash inside the name so it stays one segment", () => {
    assert.equal(entityPath("switch", "A/B", "name"), "/switch/A%2FB");
  });

  it("encodes non-ASCII as UTF-8 percent escapes", () => {
    assert.equal(entityPath("switch", "Küche", "name"), "/switch/K%C3%BCche");
  });

  it("uses the object_id in the object_id form", () => {
    assert.equal(entityPath("sensor", "Power Draw", "object_id"), "/sensor/power_draw");
  });

  it("appends the action", () => {
    assert.equal(entityPath("switch", "Relay", "name", "turn_off"), "/switch/Relay/turn_off");
  });
});

describe("createUrlStyleMemory()", () => {
  it("tries the name first, then the object_id", () => {
    const memory = createUrlStyleMemory();
    assert.deepEqual(memory.order("http://a", "switch", "Relay"), ["name", "object_id"]);
  });

  it("tries one form when both spell the same path", () => {
    const memory = createUrlStyleMemory();
    assert.deepEqual(memory.order("http://a", "switch", "relay_1"), ["name"]);
  });

  it("tries the remembered form first and keeps the other as a fallback", () => {
    const memory = createUrlStyleMemory();
    memory.remember("http://a", "switch", "Relay", "object_id");
    assert.deepEqual(memory.order("http://a", "switch", "Relay"), ["object_id", "name"]);
  });

  it("remembers per device, domain and entity", () => {
    const memory = createUrlStyleMemory();
    memory.remember("http://a", "switch", "Relay", "object_id");
    assert.deepEqual(memory.order("http://b", "switch", "Relay"), ["name", "object_id"]);
    assert.deepEqual(memory.order("http://a", "sensor", "Relay"), ["name", "object_id"]);
    assert.deepEqual(memory.order("http://a", "switch", "Relay 2"), ["name", "object_id"]);
  });
});
