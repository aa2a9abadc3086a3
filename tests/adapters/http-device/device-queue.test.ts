import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createDeviceQueue } from "../../../src/adapters/http-device/device-queue.ts";

/** A task the test finishes by hand, recording when it started. */
function gate(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return {
    task: async () => {
      log.push(`start ${name}`);
      await done;
      log.push(`end ${name}`);
      return name;
    },
    finish: () => {
      finish();
    },
  };
}

const never = new AbortController().signal;
const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("createDeviceQueue()", () => {
  it("runs the tasks of one device one after another, in order", async () => {
    const queue = createDeviceQueue();
    const log: string[] = [];
    const a = gate(log, "a");
    const b = gate(log, "b");
    const c = gate(log, "c");
    const results = [queue.run("d1", never, a.task), queue.run("d1", never, b.task), queue.run("d1", never, c.task)];
    await tick();
    assert.deepEqual(log, ["start a"]);
    a.finish();
    await tick();
    assert.deepEqual(log, ["start a", "end a", "start b"]);
    b.finish();
    c.finish();
    assert.deepEqual(await Promise.all(results), ["a", "b", "c"]);
    assert.deepEqual(log, ["start a", "end a", "start b", "end b", "start c", "end c"]);
  });

  it("runs tasks of different devices at the same time", async () => {
    const queue = createDeviceQueue();
    const log: string[] = [];
    const a = gate(log, "a");
    const b = gate(log, "b");
    const results = [queue.run("d1", never, a.task), queue.run("d2", never, b.task)];
    await tick();
    assert.deepEqual(log, ["start a", "start b"]);
    a.finish();
    b.finish();
    await Promise.all(results);
  });

  it("drops a waiter whose signal aborts, and its task never runs", async () => {
    const queue = createDeviceQueue();
    const log: string[] = [];
    const a = gate(log, "a");
    const b = gate(log, "b");
    const c = gate(log, "c");
    const abort = new AbortController();
    const first = queue.run("d1", never, a.task);
    const second = queue.run("d1", abort.signal, b.task);
    const third = queue.run("d1", never, c.task);
    abort.abort(new Error("gave up"));
    await assert.rejects(second, /gave up/);
    a.finish();
    c.finish();
    await Promise.all([first, third]);
    assert.deepEqual(log, ["start a", "end a", "start c", "end c"]);
  });

  it("rejects at once with an already aborted signal", async () => {
    const queue = createDeviceQueue();
    await assert.rejects(queue.run("d1", AbortSignal.abort(new Error("stop")), () => Promise.resolve(1)), /stop/);
  });

  it("frees the device when a task fails", async () => {
    const queue = createDeviceQueue();
    await assert.rejects(queue.run("d1", never, () => Promise.reject(new Error("boom"))), /boom/);
    assert.equal(await queue.run("d1", never, () => Promise.resolve("next")), "next");
  });
});
