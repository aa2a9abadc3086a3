import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PLANTS } from "./plants.ts";
import { runPlant } from "./run.ts";

describe("planted bugs in the safety checks", () => {
  for (const plant of PLANTS) {
    it(`are caught by the domain's safety tests: ${plant.name}`, () => {
      const result = runPlant(plant);
      assert.ok(result.caught, `${plant.name}: ${result.detail}`);
    });
  }
});
