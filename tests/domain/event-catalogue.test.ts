// The one catalogue of what each PoolEvent says: every kind has words, a level, and (when worth one) the Event
// on its Node; quarantine times are written as Date would write them although the domain never touches Date.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { describeEvent, isoTime } from "../../src/domain/event-catalogue.ts";
import type { PoolEvent } from "../../src/domain/events.ts";

/** One event of every kind: the compiler checks that the record names each `type` once. */
const ONE_OF_EACH: { readonly [K in PoolEvent["type"]]: Extract<PoolEvent, { type: K }> } = {
  "powered-on": { type: "powered-on", machine: "w1", group: "g", confirmed: false },
  "power-on-failed": { type: "power-on-failed", machine: "w1", group: "g", error: "timeout" },
  "power-on-queued": { type: "power-on-queued", machine: "w1", group: "g" },
  booted: { type: "booted", machine: "w1", group: "g", node: "w1.lan", durationMs: 84_250 },
  "power-restored": { type: "power-restored", machine: "w1", group: "g", node: "w1.lan" },
  quarantined: { type: "quarantined", machine: "w1", group: "g", until: Date.UTC(2026, 11, 1, 8, 30), failures: 2, reason: "never registered" },
  "power-off-started": { type: "power-off-started", machine: "w1", node: "w1.lan", resumed: true },
  "power-off-step": { type: "power-off-step", machine: "w1", step: "grace", outcome: "waiting", detail: "" },
  "plug-off": { type: "plug-off", machine: "w1", reason: "power-off", watts: 3, graceEnded: "standby" },
  "node-deleted": { type: "node-deleted", machine: "w1", node: "w1.lan" },
  "power-off-finished": { type: "power-off-finished", machine: "w1", durationMs: 95_000 },
  "power-off-aborted": { type: "power-off-aborted", machine: "w1", reason: "taint removed" },
  refused: { type: "refused", machine: "w1", rule: "held", detail: "held by annotation" },
  "plug-read-failed": { type: "plug-read-failed", machine: "w1", error: "timeout" },
  "provider-id-mismatch": { type: "provider-id-mismatch", machine: "w1", providerID: "aws://w1", expected: "k3s://w1" },
  "unexpected-power": { type: "unexpected-power", machine: "w1", detail: "plug on, nobody asked" },
  "powered-outside": { type: "powered-outside", machine: "w1", detail: "no Node, no record" },
  "duplicate-nodes": { type: "duplicate-nodes", machine: "w1", nodes: ["w1", "w1-old"] },
  "hard-cut": { type: "hard-cut", machine: "w1", node: "", detail: "still Ready after 5m" },
  "device-mismatch": { type: "device-mismatch", machine: "w1", expected: 'name "plug-w1"', seen: 'name "plug-w2"' },
  "device-duplicate": { type: "device-duplicate", machine: "w1", identity: 'name "plug"', other: "w2" },
  "device-learned": { type: "device-learned", machine: "w1", identity: 'name "plug-w1"' },
  "device-not-recorded": { type: "device-not-recorded", machine: "w1", identity: 'name "plug-w1"', error: "apiserver down" },
  "device-restarted": { type: "device-restarted", machine: "w1", uptimeSeconds: 3 },
  revived: { type: "revived", machine: "w1", node: "w1.lan", how: "power-cycle" },
  stranded: { type: "stranded", machine: "w1", node: "w1.lan", detail: "it is held" },
  "template-slices-differ": { type: "template-slices-differ", machine: "w1", group: "g", differing: ["w2"], detail: "GPU model" },
};

describe("describeEvent()", () => {
  for (const event of Object.values(ONE_OF_EACH)) {
    it(`tells ${event.type} in a sentence naming its machine or Node`, () => {
      const text = describeEvent(event);
      assert.match(text.message, /\bw1\b/);
      assert.ok(text.onNode === undefined || text.onNode.node === "w1" || text.onNode.node === "w1.lan");
      assert.ok(text.onNode === undefined || /^[A-Z][A-Za-z]+$/.test(text.onNode.reason), "a CamelCase reason");
    });
  }

  it("keeps progress of a power-off at debug level and off the Node, and tells a failed step as a warning", () => {
    assert.deepEqual(describeEvent(ONE_OF_EACH["power-off-step"]).onNode, undefined);
    assert.equal(describeEvent(ONE_OF_EACH["power-off-step"]).level, "debug");
    const failed = describeEvent({ ...ONE_OF_EACH["power-off-step"], outcome: "failed", detail: "unreachable" });
    assert.equal(failed.level, "warning");
    assert.equal(failed.onNode?.reason, "PowerOffStepFailed");
  });

  it("warns about what someone should look at, and only that", () => {
    const warnings = Object.values(ONE_OF_EACH).filter((e) => describeEvent(e).level === "warning").map((e) => e.type).sort();
    assert.deepEqual(warnings, [
      "device-duplicate",
      "device-mismatch",
      "device-not-recorded",
      "device-restarted",
      "duplicate-nodes", "hard-cut", "plug-read-failed", "power-off-aborted", "power-on-failed", "power-restored",
      "powered-outside", "provider-id-mismatch", "quarantined", "refused", "revived", "stranded", "template-slices-differ", "unexpected-power",
    ]);
  });

  it("says what the event carries: an unconfirmed switch, the draw and the standby at the cut, the time of a quarantine", () => {
    assert.match(describeEvent(ONE_OF_EACH["powered-on"]).message, /unconfirmed: its answer was lost/);
    assert.equal(describeEvent(ONE_OF_EACH["plug-off"]).message, "switched off the plug of w1 (power-off), drawing 3 W, standby draw reached");
    assert.match(describeEvent(ONE_OF_EACH.quarantined).message, /until 2026-12-01T08:30:00\.000Z: never registered$/);
    assert.equal(describeEvent(ONE_OF_EACH["hard-cut"]).onNode?.node, "w1", "a hard cut without a Node is told on the machine's name");
  });
});

describe("isoTime()", () => {
  it("writes epoch milliseconds as Date.prototype.toISOString does", () => {
    const samples = [0, 1, 999, 86_399_999, 86_400_000, 951_782_400_000, 4_107_542_399_999, -1, -86_400_001, Date.UTC(2024, 1, 29, 23, 59, 59, 7)];
    for (let i = 0; i < 2000; i++) samples.push(Math.floor((i * 7_919_777_777_7) % 8e12) - 2e12);
    for (const ms of samples) assert.equal(isoTime(ms), new Date(ms).toISOString(), String(ms));
  });
});
