// A command sent just before an instance stopped acting must have ended before another instance can start: the
// Lease lasts longer by as much as the slowest kind of device in use needs beyond the 4 s the defaults allow.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_LEASE_TIMING, leaseTimingFor } from "../../src/adapters/kubernetes/leader-lease.ts";
import { longestDeviceTimeout } from "../../src/app/serve.ts";
import { config, group, load, node } from "./fixtures/config-builders.ts";

describe("plugpool's Lease timing", () => {
  it("keeps client-go's defaults for devices of 4 s or less", () => {
    for (const ms of [0, 2_000, 4_000]) assert.deepEqual(leaseTimingFor(ms), DEFAULT_LEASE_TIMING);
    assert.deepEqual(DEFAULT_LEASE_TIMING, { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
  });

  it("lasts longer by the whole seconds a slower device needs beyond 4 s, with the renew deadline and period unchanged", () => {
    assert.deepEqual(leaseTimingFor(10_000), { leaseDurationMs: 21_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
    assert.equal(leaseTimingFor(4_001).leaseDurationMs, 16_000);
    // The margin between the last acting moment and another's start always covers the command.
    for (const ms of [4_001, 7_500, 10_000, 30_000]) {
      const t = leaseTimingFor(ms);
      assert.ok(t.leaseDurationMs - t.renewDeadlineMs >= ms + 1_000, String(ms));
    }
  });

  it("is sized by the kinds of device the machines use, not every kind configured", () => {
    const plugsOnly = load(config([group("workers", [node("worker-1")])], { devices: { timeouts: { redfish: "25s" } } }));
    assert.equal(longestDeviceTimeout(plugsOnly), 2_000);
    const slowPlugs = load(config([group("workers", [node("worker-1")])], { devices: { timeouts: { plug: "7s" } } }));
    assert.equal(longestDeviceTimeout(slowPlugs), 7_000);
  });
});
