import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { describe, it } from "node:test";
import { PlugpoolError } from "../../../src/domain/errors.ts";
import { createBoundedCall, type DeviceCall } from "../../../src/adapters/http-device/device-call.ts";

/** Calls on plugs named by strings, bounded by `timeoutMs`. */
function boundedBy(timeoutMs: number) {
  return createBoundedCall<string, string>({
    timeoutMs,
    target: (control) => control,
    where: (control, action) => `${action} ${control}`,
    unsafe: "refused",
    command: "the command",
  });
}

const bounded = boundedBy(60_000);

/** Work that runs until its call's signal aborts, then fails with the signal's reason. */
function untilAborted(seen: DeviceCall<string>[]) {
  return (call: DeviceCall<string>): Promise<never> =>
    new Promise((_resolve, reject) => {
      seen.push(call);
      if (call.signal.aborted) reject(call.signal.reason as Error);
      else call.signal.addEventListener("abort", () => { reject(call.signal.reason as Error); }, { once: true });
    });
}

describe("createBoundedCall()", () => {
  it("ends every call on a caller's signal when the caller aborts, with the caller's reason", async () => {
    const caller = new AbortController();
    const seen: DeviceCall<string>[] = [];
    const calls = ["plug-1", "plug-2", "plug-3"].map((plug) => bounded(plug, "reading", { signal: caller.signal }, untilAborted(seen)));
    const reason = new Error("the RPC's deadline passed");
    caller.abort(reason);
    for (const [i, call] of calls.entries()) {
      await assert.rejects(call, (e: unknown) => e instanceof PlugpoolError && e.message === `reading plug-${String(i + 1)}: aborted`);
    }
    assert.deepEqual(seen.map((c) => c.signal.reason as unknown), [reason, reason, reason]);
  });

  it("hears a caller's signal through one listener however many calls share it, and leaves ended calls alone", async () => {
    const caller = new AbortController();
    const seen: DeviceCall<string>[] = [];
    let finish!: () => void;
    const finished = new Promise<string>((resolve) => (finish = () => { resolve("read"); }));
    let endedCall: DeviceCall<string> | undefined;
    const ended = bounded("plug-0", "reading", { signal: caller.signal }, (call) => {
      endedCall = call;
      return finished;
    });
    const waiting = Array.from({ length: 500 }, (_, i) => bounded(`plug-${String(i + 1)}`, "reading", { signal: caller.signal }, untilAborted(seen)));
    assert.equal(getEventListeners(caller.signal, "abort").length, 1);
    finish();
    assert.equal(await ended, "read");
    caller.abort(new Error("stop"));
    const outcomes = await Promise.allSettled(waiting);
    assert.equal(outcomes.filter((o) => o.status === "rejected").length, 500);
    assert.equal(seen.length, 500);
    assert.ok(seen.every((c) => c.signal.aborted));
    assert.equal(endedCall?.signal.aborted, false);
  });

  it("aborts a call at once when its caller's signal is already aborted", async () => {
    const caller = new AbortController();
    caller.abort(new Error("gone"));
    const seen: DeviceCall<string>[] = [];
    await assert.rejects(bounded("plug-1", "reading", { signal: caller.signal }, untilAborted(seen)), /reading plug-1: aborted/);
    assert.equal(getEventListeners(caller.signal, "abort").length, 0);
  });
});

const nextTurn = (): Promise<void> => new Promise((resolve) => { setImmediate(resolve); });

describe("createBoundedCall() start", () => {
  /** A call on `plug` whose work notes that it started and then answers at once. */
  const noting = (started: string[], plug: string): Promise<string> =>
    bounded(plug, "reading", undefined, () => {
      started.push(plug);
      return Promise.resolve(plug);
    });
  const plugs = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `plug-${String(from + i)}`);

  it("starts 20 of the calls asked in one pass at once and the rest in later turns, 20 at a time, in the order asked", async () => {
    const started: string[] = [];
    const calls = plugs(0, 50).map((plug) => noting(started, plug));
    assert.deepEqual(started, plugs(0, 20));
    await nextTurn();
    assert.deepEqual(started, plugs(0, 40));
    await nextTurn();
    assert.deepEqual(started, plugs(0, 50));
    assert.deepEqual(await Promise.all(calls), plugs(0, 50));
  });

  it("starts a call asked while others wait for their turn after them", async () => {
    const started: string[] = [];
    const first = plugs(0, 25).map((plug) => noting(started, plug));
    await Promise.resolve(); // a later pass, before the waiting calls' turn
    const late = noting(started, "plug-late");
    assert.deepEqual(started, plugs(0, 20));
    await Promise.all([...first, late]);
    assert.deepEqual(started, [...plugs(0, 25), "plug-late"]);
  });

  it("starts the first calls of each new pass at once when none wait", async () => {
    const started: string[] = [];
    await Promise.all(plugs(0, 20).map((plug) => noting(started, plug)));
    const next = plugs(20, 40).map((plug) => noting(started, plug));
    assert.deepEqual(started, plugs(0, 40));
    await Promise.all(next);
  });
});

/** Keeps the CPU busy for `ms`, as setting up hundreds of requests in one pass does. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) { /* spin */ }
}

describe("createBoundedCall() deadlines", () => {
  const short = boundedBy(400);

  it("counts a call's timeout from the pass that asked for it, so calls asked together end together", async () => {
    const order: string[] = [];
    const first = short("plug-1", "reading", undefined, untilAborted([]));
    busy(150);
    const late = short("plug-2", "reading", undefined, untilAborted([]));
    // Counted from its own start, the late call would end 150 ms after the first; from the pass, with it.
    const mark = new Promise<void>((resolve) => setTimeout(() => { order.push("first + 75 ms"); resolve(); }, 400 - 150 + 75));
    const settled = [first, late].map((call, i) => call.catch((e: unknown) => { order.push(`call ${String(i + 1)}: ${(e as Error).message}`); }));
    await Promise.all([...settled, mark]);
    assert.deepEqual(order, [
      "call 1: reading plug-1: timed out after 400 ms",
      "call 2: reading plug-2: timed out after 400 ms",
      "first + 75 ms",
    ]);
  });

  it("still gives a call asked in a long pass half its timeout", async () => {
    const order: string[] = [];
    const first = short("plug-1", "reading", undefined, untilAborted([]));
    busy(500);
    const late = short("plug-2", "reading", undefined, untilAborted([]));
    const early = new Promise<void>((resolve) => setTimeout(() => { order.push("half the timeout - 50 ms"); resolve(); }, 150));
    const settled = [first, late].map((call, i) => call.catch(() => { order.push(`call ${String(i + 1)} timed out`); }));
    await Promise.all([...settled, early]);
    assert.deepEqual(order, ["call 1 timed out", "half the timeout - 50 ms", "call 2 timed out"]);
  });
});
