// bench/latency.ts: how the bench samples RPC latency against several servers side by side, and its percentile.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { interleaved, percentile, type Probe } from "../../bench/latency.ts";

/** A probe that records its name in `calls`, and fails on the calls numbered in `failing` (counted from 0). */
function recording(name: string, calls: string[], failing: readonly number[] = [], delayMs = 0): Probe {
  let n = 0;
  return async () => {
    const call = n++;
    calls.push(name);
    if (delayMs > 0) await sleep(delayMs);
    return failing.includes(call) ? { error: new Error(`${name} failed`) } : {};
  };
}

describe("interleaved sampling", () => {
  it("calls each probe once per round, one at a time, each round starting with the next probe", async () => {
    const calls: string[] = [];
    let inFlight = 0;
    let most = 0;
    const tracked = (name: string): Probe => {
      const inner = recording(name, calls, [], 1);
      return async () => {
        most = Math.max(most, ++inFlight);
        const result = await inner();
        inFlight -= 1;
        return result;
      };
    };
    await interleaved([tracked("a"), tracked("b"), tracked("c")], 3, 1);
    assert.deepEqual(calls, ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]);
    assert.equal(most, 1);
  });

  it("counts only the rounds after the warm-up, and each probe's errors against that probe", async () => {
    const calls: string[] = [];
    // Calls 0–1 are the warm-up; a failure there is not counted.
    const [a, b] = await interleaved([recording("a", calls, [0, 3]), recording("b", calls, [2, 4, 5])], 4, 2);
    assert.ok(a !== undefined && b !== undefined);
    assert.deepEqual([a.n, a.errors], [4, 1]);
    assert.deepEqual([b.n, b.errors], [4, 3]);
  });

  it("attributes each sample to the probe that took it", async () => {
    const calls: string[] = [];
    const [prompt, slow] = await interleaved([recording("prompt", calls), recording("slow", calls, [], 25)], 5, 0);
    assert.ok(slow !== undefined && prompt !== undefined);
    assert.ok(slow.p50Ms >= 20, `slow p50 ${String(slow.p50Ms)} ms`);
    assert.ok(prompt.maxMs < slow.p50Ms, `prompt max ${String(prompt.maxMs)} ms, slow p50 ${String(slow.p50Ms)} ms`);
  });
});

describe("percentile", () => {
  it("is the nearest rank: p99 of 1,000 samples is the tenth slowest", () => {
    const sorted = Array.from({ length: 1000 }, (_, i) => i + 1);
    assert.equal(percentile(sorted, 99), 990);
    assert.equal(percentile(sorted, 50), 500);
    assert.equal(percentile([7], 99), 7);
    assert.ok(Number.isNaN(percentile([], 50)));
  });
});
