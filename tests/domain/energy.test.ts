import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MAX_READING_GAP_MS, WATT_MS_PER_KWH, interrupted, newMeter, observe, switched } from "../../src/domain/energy.ts";
import { FakeClock } from "../harness/fakes/clock.ts";

const S = 1000;

function kwh(wattMs: number): number {
  return wattMs / WATT_MS_PER_KWH;
}

describe("energy meter", () => {
  it("counts the span between two readings as on when both read on, off when both read off", () => {
    const clock = new FakeClock();
    const m = newMeter();
    observe(m, clock.now(), { on: true });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: true });
    clock.advance(30 * S);
    observe(m, clock.now(), { on: false });
    clock.advance(20 * S);
    observe(m, clock.now(), { on: false });
    // 10 s on, then a change at an unknown moment of 30 s (half each), then 20 s off.
    assert.equal(m.onMs, 25 * S);
    assert.equal(m.offMs, 35 * S);
  });

  it("counts nothing before the first reading", () => {
    const clock = new FakeClock();
    const m = newMeter();
    clock.advance(60 * S);
    observe(m, clock.now(), { on: true });
    assert.equal(m.onMs + m.offMs + m.usedWattMs, 0);
  });

  it("integrates the draw as trapezoids between readings", () => {
    const clock = new FakeClock();
    const m = newMeter();
    observe(m, clock.now(), { on: true, watts: 40 });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: true, watts: 60 });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: true, watts: 60 });
    assert.equal(m.usedWattMs, (50 + 60) * 10 * S);
  });

  it("spans a reading whose sensor gave no value instead of counting it as zero draw", () => {
    const clock = new FakeClock();
    const m = newMeter();
    observe(m, clock.now(), { on: true, watts: 100 });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: true });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: true, watts: 100 });
    assert.equal(m.usedWattMs, 100 * 20 * S);
    assert.equal(m.onMs, 20 * S);
  });

  it("counts a relay read off as no draw, whatever its sensor last said", () => {
    const clock = new FakeClock();
    const m = newMeter();
    observe(m, clock.now(), { on: true, watts: 100 });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: false, watts: 100 });
    clock.advance(3600 * S / 10);
    observe(m, clock.now(), { on: false });
    assert.equal(m.usedWattMs, 50 * 10 * S);
  });

  it("leaves a span longer than the gap bound uncounted, on, off and energy alike", () => {
    const clock = new FakeClock();
    const m = newMeter();
    observe(m, clock.now(), { on: true, watts: 100 });
    clock.advance(MAX_READING_GAP_MS + 1);
    observe(m, clock.now(), { on: true, watts: 100 });
    assert.equal(m.onMs + m.offMs + m.usedWattMs, 0);
    clock.advance(MAX_READING_GAP_MS);
    observe(m, clock.now(), { on: true, watts: 100 });
    assert.equal(m.onMs, MAX_READING_GAP_MS);
    assert.equal(m.usedWattMs, 100 * MAX_READING_GAP_MS);
  });

  it("keeps the state before a switch until the switch's answer, and the new one from there", () => {
    const clock = new FakeClock();
    const m = newMeter();
    observe(m, clock.now(), { on: false });
    clock.advance(50 * S);
    switched(m, clock.now(), { on: true, watts: 80 });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: true, watts: 80 });
    clock.advance(5 * S);
    switched(m, clock.now(), { on: false });
    assert.equal(m.offMs, 50 * S);
    assert.equal(m.onMs, 15 * S);
    assert.equal(m.usedWattMs, 80 * 15 * S);
  });

  it("counts nothing from an unconfirmed switch to the next reading", () => {
    const clock = new FakeClock();
    const m = newMeter();
    observe(m, clock.now(), { on: true, watts: 60 });
    clock.advance(10 * S);
    interrupted(m, clock.now());
    clock.advance(10 * S);
    observe(m, clock.now(), { on: false });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: false });
    assert.equal(m.onMs, 10 * S);
    assert.equal(m.offMs, 10 * S);
    assert.equal(m.usedWattMs, 60 * 10 * S);
  });

  it("counts nothing twice when the clock steps back", () => {
    const clock = new FakeClock();
    const m = newMeter();
    observe(m, clock.now(), { on: true, watts: 10 });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: true, watts: 10 });
    clock.advance(-5 * S);
    observe(m, clock.now(), { on: true, watts: 10 });
    clock.advance(10 * S);
    observe(m, clock.now(), { on: true, watts: 10 });
    // From the newest point (10 s) to 15 s: 5 s more.
    assert.equal(m.onMs, 15 * S);
    assert.equal(m.usedWattMs, 10 * 15 * S);
  });

  it("converts watt-milliseconds to kilowatt-hours", () => {
    assert.equal(kwh(1000 * 3_600_000), 1);
  });
});
