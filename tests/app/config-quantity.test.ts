import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseQuantity } from "../../src/app/quantity.ts";

describe("parseQuantity()", () => {
  const valid: readonly [string, -1 | 0 | 1, boolean][] = [
    ["24", 1, true],
    ["500m", 1, false],
    ["64Gi", 1, true],
    ["1e3", 1, true],
    [".5", 1, false],
    ["1.5Gi", 1, true],
    ["1.", 1, true],
    ["+3", 1, true],
    ["-1", -1, true],
    ["0", 0, true],
    ["-0.0", 0, true],
    ["1.5k", 1, true],
    ["1.25k", 1, true],
    ["1.2345k", 1, false],
    ["0.5Ki", 1, true],
    ["0.001Ki", 1, false],
    ["100n", 1, false],
    ["1000000000n", 1, true],
    ["2u", 1, false],
    ["1E", 1, true],
    ["1E3", 1, true],
    ["15e-1", 1, false],
    ["20e-1", 1, true],
    ["1e+2", 1, true],
    ["1e-99999", 1, false],
    ["3e99999", 1, true],
    ["7Ei", 1, true],
  ];
  for (const [text, sign, isInteger] of valid) {
    it(`accepts ${JSON.stringify(text)} (sign ${sign}, ${isInteger ? "whole" : "fractional"})`, () => {
      assert.deepEqual(parseQuantity(text), { sign, isInteger });
    });
  }

  const invalid = ["", "64GB", "1.2.3", "Gi", "64 Gi", " 1", "1 ", "1e", "1e3.5", "1Ki2", "1KI", "1K", "1mi", "++1", "-", ".", "1,5", "0x10", "∞", "1ei", "e3"];
  for (const text of invalid) {
    it(`rejects ${JSON.stringify(text)}`, () => {
      assert.equal(parseQuantity(text), undefined);
    });
  }
});
