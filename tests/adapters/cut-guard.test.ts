// What every backend's switch asks right before a command, in the device's slot: the cut guard and the device
// check. A refusal or a failure of either sends nothing; a lost leadership is passed on as it is, so that
// cluster-autoscaler hears who acts; a call that ended reports its abort, not a refusal.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CutRefused, DeviceRefused, askDevice, askGuard, pause } from "../../src/adapters/cut-guard.ts";
import { PlugpoolError } from "../../src/domain/index.ts";

const SEEN = { id: "esphome:plug-a", uptime: 12 };

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("expected a rejection");
}

describe("askGuard()", () => {
  it("resolves when the guard allows, and hands it the call's signal", async () => {
    const signal = new AbortController().signal;
    const asked: unknown[] = [];
    await askGuard((options) => (asked.push(options), Promise.resolve(true)), signal);
    assert.deepEqual(asked, [{ signal }]);
  });

  it("throws CutRefused, saying it refused, when the guard says no", async () => {
    const error = await caught(askGuard(() => Promise.resolve(false), new AbortController().signal));
    assert.ok(error instanceof CutRefused);
    assert.equal(error.message, "the cut guard refused");
    assert.equal(error.cause, undefined);
  });

  it("throws CutRefused, saying it failed and carrying the cause, when the guard fails with any other error than not-leader", async () => {
    for (const cause of [new PlugpoolError("cluster-refused", "reading the Nodes: the apiserver said no"), new TypeError("boom")]) {
      const error = await caught(askGuard(() => Promise.reject(cause), new AbortController().signal));
      assert.ok(error instanceof CutRefused);
      assert.equal(error.message, "the cut guard failed");
      assert.equal(error.cause, cause);
    }
  });

  it("passes a not-leader refusal on as it is", async () => {
    const refusal = new PlugpoolError("not-leader", "switching off: refused");
    assert.equal(await caught(askGuard(() => Promise.reject(refusal), new AbortController().signal)), refusal);
  });

  it("reports the abort, not a refusal, when the call ended while the guard was asked", async () => {
    const controller = new AbortController();
    const error = await caught(
      askGuard(() => {
        controller.abort(new Error("the call ended"));
        return Promise.reject(new Error("aborted read"));
      }, controller.signal),
    );
    assert.ok(error instanceof Error);
    assert.equal(error.message, "the call ended");
  });
});

describe("askDevice()", () => {
  it("resolves when the check accepts, and hands it what the device answered as and the call's signal", async () => {
    const signal = new AbortController().signal;
    const asked: unknown[] = [];
    await askDevice((seen, options) => (asked.push(seen, options), Promise.resolve(true)), SEEN, "command", signal);
    assert.deepEqual(asked, [SEEN, { signal }]);
  });

  it("throws DeviceRefused, not failed, naming what was seen and what it stood before, when the check says no", async () => {
    const error = await caught(askDevice(() => Promise.resolve(false), SEEN, "read", new AbortController().signal));
    assert.ok(error instanceof DeviceRefused);
    assert.equal(error.name, "DeviceRefused");
    assert.equal(error.message, "the device check refused");
    assert.equal(error.failed, false);
    assert.equal(error.cause, undefined);
    assert.deepEqual(error.seen, SEEN);
    assert.equal(error.before, "read");
  });

  it("throws DeviceRefused, failed and carrying the cause, when the check fails with any other error than not-leader", async () => {
    for (const cause of [new PlugpoolError("cluster-refused", "storing the identity: the apiserver said no"), new TypeError("boom")]) {
      const error = await caught(askDevice(() => Promise.reject(cause), SEEN, "command", new AbortController().signal));
      assert.ok(error instanceof DeviceRefused);
      assert.equal(error.message, "the device check failed");
      assert.equal(error.failed, true);
      assert.equal(error.cause, cause);
      assert.equal(error.before, "command");
    }
  });

  it("passes a not-leader refusal on as it is", async () => {
    const refusal = new PlugpoolError("not-leader", "switching on: refused");
    assert.equal(await caught(askDevice(() => Promise.reject(refusal), SEEN, "command", new AbortController().signal)), refusal);
  });

  it("reports the abort, not a refusal, when the call ended while the check was asked", async () => {
    const controller = new AbortController();
    const error = await caught(
      askDevice(
        () => {
          controller.abort(new Error("the call ended"));
          return Promise.reject(new Error("aborted read"));
        },
        SEEN,
        "command",
        controller.signal,
      ),
    );
    assert.ok(error instanceof Error);
    assert.equal(error.message, "the call ended");
  });
});

describe("CutRefused", () => {
  it("is named so in logs", () => {
    assert.equal(new CutRefused("x").name, "CutRefused");
  });
});

describe("pause()", () => {
  it("waits and says true", async () => {
    assert.equal(await pause(1, new AbortController().signal), true);
  });

  it("says false, without throwing, when the call ends first", async () => {
    const controller = new AbortController();
    const waited = pause(60_000, controller.signal);
    controller.abort();
    assert.equal(await waited, false);
    assert.equal(await pause(1, AbortSignal.abort()), false);
  });
});
