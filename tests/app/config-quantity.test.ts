import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compareQuantities, parseQuantity } from "../../src/app/config/quantity.ts";

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

describe("compareQuantities()", () => {
  const cases: readonly [string, string, -1 | 0 | 1][] = [
    ["1Gi", "1G", 1],
    ["1500m", "1.5", 0],
    ["64Gi", "65536Mi", 0],
    ["65536Mi", "67108863Ki", 1],
    ["24", "23500m", 1],
    ["110", "1.1e2", 0],
    ["1E", "1e18", 0],
    ["-1", "0", -1],
    ["0", "-0.0", 0],
    ["3", "4", -1],
  ];
  for (const [a, b, sign] of cases) {
    it(`${a} ${sign === 0 ? "=" : sign > 0 ? ">" : "<"} ${b}`, () => {
      assert.equal(compareQuantities(a, b), sign);
      assert.equal(compareQuantities(b, a), sign === 0 ? 0 : -sign);
    });
  }

  it("does not compare what is not a quantity, nor exponents beyond 100", () => {
    assert.equal(compareQuantities("1 Gi", "1"), undefined);
    assert.equal(compareQuantities("1", "1e101"), undefined);
    assert.equal(compareQuantities("1e-101", "1"), undefined);
    assert.equal(compareQuantities("1e100", "1e99"), 1);
  });
});
