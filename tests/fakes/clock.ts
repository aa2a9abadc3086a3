import type { Clock } from "../../src/domain/index.ts";

/** A clock that moves only when told to. */
export class FakeClock implements Clock {
  #now: number;

  constructor(start = 1_800_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  advance(ms: number): void {
    this.#now += ms;
  }
}
