import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION, mayCutPower } from "../../src/domain/index.ts";
import { PREFIX, World } from "../fakes/world.ts";

describe("mayCutPower()", () => {
  const world = (): World => new World({ groups: [{ id: "g", machines: ["m-1", "m-2"], hold: ["m-2"] }] });

  it("allows a machine no Node stands for", () => {
    const w = world();
    assert.deepEqual(mayCutPower(w.machine("m-1"), w.cluster, PREFIX), { allowed: true });
  });

  it("allows a registered machine whose Node carries the ToBeDeleted taint", () => {
    const w = world();
    w.registerTainted("m-1");
    assert.deepEqual(mayCutPower(w.machine("m-1"), w.cluster, PREFIX), { allowed: true });
  });

  it("refuses a registered machine without the taint", () => {
    const w = world();
    w.register("m-1");
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "registered-without-taint");
  });

  it("refuses when a Node carries the machine's name under a foreign providerID without the taint", () => {
    const w = world();
    w.cluster.addNode({ name: "m-1", providerID: "aws:///i-1" });
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "registered-without-taint");
  });

  it("refuses when any of two Nodes standing for the machine lacks the taint", () => {
    const w = world();
    w.cluster.addNode({ name: "elsewhere", providerID: PREFIX + "m-1" });
    w.cluster.taint("elsewhere");
    w.cluster.addNode({ name: "m-1", providerID: "aws:///i-1" });
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.match(verdict.allowed ? "" : verdict.detail, /node m-1 is registered without/);
  });

  it("refuses a machine held in the configuration or by annotation, even when tainted", () => {
    const w = world();
    assert.equal(mayCutPower(w.machine("m-2"), w.cluster, PREFIX).allowed, false);
    w.registerTainted("m-1");
    w.cluster.annotate("m-1", HOLD_ANNOTATION, "");
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "held");
    w.cluster.annotate("m-1", HOLD_ANNOTATION, "false");
    assert.equal(mayCutPower(w.machine("m-1"), w.cluster, PREFIX).allowed, true);
  });
});
