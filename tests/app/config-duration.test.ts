import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseDuration } from "../../src/app/config/duration.ts";

describe("parseDuration()", () => {
  const valid: readonly [string, number][] = [
    ["90s", 90_000],
    ["5m", 300_000],
    ["1h30m", 5_400_000],
    ["500ms", 500],
    ["1.5h", 5_400_000],
    ["0", 0],
    ["0s", 0],
    ["1.1s", 1_100],
    [".5s", 500],
    ["1.s", 1_000],
    ["1m30.5s", 90_500],
    ["250us", 0.25],
    ["250µs", 0.25],
    ["250μs", 0.25],
    ["1500000ns", 1.5],
    ["2h45m30s100ms", 9_930_100],
    ["2562047h", 9_223_369_200_000],
  ];
  for (const [text, ms] of valid) {
    it(`reads ${text} as ${ms} ms`, () => {
      assert.equal(parseDuration(text), ms);
    });
  }

  const invalid = ["", "5", "5 m", " 5m", "-1s", "+1s", "1d", "1w", "1H", "1h 30m", "s", ".s", "1e3s", "1,5s", "1.5.5s", "2562048h", "five minutes"];
  for (const text of invalid) {
    it(`rejects ${JSON.stringify(text)}`, () => {
      assert.equal(parseDuration(text), undefined);
    });
  }
});
