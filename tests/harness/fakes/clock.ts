import type { Clock } from "../../../src/domain/index.ts";

/** A clock that moves only when told to: time passing (`advance`), or the wall clock stepping (`step`). */
export class FakeClock implements Clock {
  #now: number;
  #monotonic = 0;

  constructor(start = 1_800_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  monotonic(): number {
    return this.#monotonic;
  }

  /** Time passes: both clocks move on. */
  advance(ms: number): void {
    this.#now += ms;
    this.#monotonic += ms;
  }

  /** The wall clock is set `ms` forward (or back, negative) while no time passes: the monotonic one stays. */
  step(ms: number): void {
    this.#now += ms;
  }
}
