import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createLock, untilAborted } from "../../src/domain/lock.ts";
import { rejectsWith } from "../harness/fakes/assertions.ts";

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe("createLock()", () => {
  it("runs functions one at a time, in call order", async () => {
    const lock = createLock();
    const order: string[] = [];
    const gate = deferred();
    const first = lock(async () => {
      order.push("first starts");
      await gate.promise;
      order.push("first ends");
    });
    const second = lock(() => {
      order.push("second");
      return Promise.resolve();
    });
    await Promise.resolve();
    gate.resolve();
    await Promise.all([first, second]);
    assert.deepEqual(order, ["first starts", "first ends", "second"]);
  });

  it("lets a waiter give up when its signal aborts without letting later callers jump the queue", async () => {
    const lock = createLock();
    const order: string[] = [];
    const gate = deferred();
    const holder = lock(async () => {
      await gate.promise;
      order.push("holder");
    });
    const controller = new AbortController();
    const quitter = lock(() => {
      order.push("quitter");
      return Promise.resolve();
    }, controller.signal);
    const patient = lock(() => {
      order.push("patient");
      return Promise.resolve();
    });
    controller.abort();
    await rejectsWith(quitter, "cancelled", /cancelled/);
    gate.resolve();
    await Promise.all([holder, patient]);
    assert.deepEqual(order, ["holder", "patient"]);
  });
});

describe("untilAborted()", () => {
  it("stops waiting when the signal aborts, and at once for a signal already aborted", async () => {
    const controller = new AbortController();
    const waiting = untilAborted(new Promise(() => undefined), controller.signal);
    controller.abort();
    await rejectsWith(waiting, "cancelled");
    await rejectsWith(untilAborted(Promise.resolve(1), controller.signal), "cancelled");
  });

  it("passes the outcome through when the signal does not abort", async () => {
    assert.equal(await untilAborted(Promise.resolve(7), new AbortController().signal), 7);
    assert.equal(await untilAborted(Promise.resolve(8), undefined), 8);
  });
});
