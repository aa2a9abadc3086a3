// A power-off job as a value: its facts hold in order and go with what they build on, an undo is its own kind of
// job, and the runner's bookkeeping answers "is this news" once.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PlugpoolError } from "../../src/domain/errors.ts";
import type { Revival } from "../../src/domain/revival.ts";
import {
  establish,
  establishOnce,
  newJob,
  newUndo,
  nodeDeleted,
  notReadyNoLaterThan,
  retract,
  revivalLeft,
  revivalStarted,
  revivalTold,
  shutdownAdopted,
  stepDone,
  stepFailed,
  undoWritesSettled,
  waiting,
  type PowerOffJob,
} from "../../src/domain/power-off-job.ts";

describe("a power-off job's facts", () => {
  it("refuses a fact before the one it builds on, naming both", () => {
    const job = newJob("worker-1", 0);
    for (const [fact, base] of [["plugOff", "notReady"], ["graceElapsed", "notReady"], ["standbyReached", "standby"], ["podRemoved", "plugOff"]] as const) {
      assert.throws(() => { establish(job, fact, 5); }, (e: unknown) => {
        assert.ok(e instanceof PlugpoolError);
        assert.equal(e.code, "internal");
        assert.equal(e.message, `power-off of node "worker-1": ${fact} cannot hold before ${base}`);
        return true;
      });
    }
    assert.deepEqual(job.facts, {}, "nothing was set by a refused fact");
  });

  it("holds them in order, and a retracted NotReady takes the grace and its standby with it", () => {
    const job = newJob("worker-1", 0);
    establish(job, "shutdownRequested", 1);
    establish(job, "notReady", 2);
    establish(job, "standby", 3);
    establish(job, "standbyReached", 4);
    establish(job, "graceElapsed", 4);
    retract(job, "notReady");
    assert.deepEqual(job.facts, { shutdownRequested: 1 });
  });

  it("keeps the plug read on after an unconfirmed cut through a retracted NotReady: that machine is never power-cycled", () => {
    const job = newJob("worker-1", 0);
    establish(job, "notReady", 2);
    establish(job, "cutUnconfirmed", 3);
    retract(job, "cutUnconfirmed");
    establish(job, "onAfterUnconfirmedCut", 4);
    retract(job, "notReady");
    assert.deepEqual(job.facts, { onAfterUnconfirmedCut: 4 });
  });

  it("keeps a fact's first time when established once, and moves a NotReady ahead of the clock back to now", () => {
    const job = newJob("worker-1", 0);
    establishOnce(job, "recordCommitted", 1);
    establishOnce(job, "recordCommitted", 9);
    establish(job, "notReady", 50);
    notReadyNoLaterThan(job, 20);
    notReadyNoLaterThan(job, 30);
    assert.deepEqual(job.facts, { recordCommitted: 1, notReady: 20 });
  });
});

describe("a power-off job's bookkeeping", () => {
  it("tells each step's completion, each wait and each Node deleted as news once", () => {
    const job = newJob("worker-1", 0);
    assert.deepEqual([stepDone(job, "grace"), stepDone(job, "grace"), stepDone(job, "plug-off")], [true, false, true]);
    assert.deepEqual([waiting(job, "grace: 3 W"), waiting(job, "grace: 3 W"), waiting(job, "grace: 9 W")], [true, false, true]);
    assert.deepEqual([nodeDeleted(job, "worker-1"), nodeDeleted(job, "worker-1")], [true, false]);
  });

  it("backs a failing step off by its failures before, and holds every step until then", () => {
    const job = newJob("worker-1", 0);
    const seen: number[] = [];
    const backoff = (attempt: number): number => { seen.push(attempt); return 100 * 2 ** attempt; };
    assert.equal(stepFailed(job, "plug-off", backoff, 1000), 100);
    assert.equal(stepFailed(job, "plug-off", backoff, 2000), 200);
    assert.equal(stepFailed(job, "grace", backoff, 3000), 100);
    assert.deepEqual(seen, [0, 1, 0]);
    assert.equal(job.notBefore, 3100);
  });
});

describe("an undo of a power-off record", () => {
  it("is its own kind of job: stopped from its start, on the Nodes the record was written to, waiting for the writes", () => {
    const undo = newUndo(7, { nodes: ["worker-1", "worker-1b"], reason: "its DeleteNodes failed", quiet: false });
    assert.equal(undo.kind, "undo");
    assert.deepEqual(undo.aborting, { step: "check-taint", reason: "its DeleteNodes failed" });
    assert.deepEqual([undo.node, undo.startedAt, undo.nodes, undo.writesOut], ["worker-1", 7, ["worker-1", "worker-1b"], true]);
    undoWritesSettled(undo);
    assert.equal(undo.writesOut, false);
    assert.equal(newJob("worker-1", 7).kind, "power-off");
  });
});

describe("a power-off job that takes up a power-off pod an earlier run created", () => {
  it("counts the shutdown as its own from the pod's start, keeping what it knew, with the pod as its first", () => {
    const job = newJob("worker-1", 0);
    shutdownAdopted(job, 40, "uid-1");
    assert.deepEqual([job.facts.shutdownRequested, job.shutdownNodeUid, job.podAttempts], [40, "uid-1", 1]);
    shutdownAdopted(job, 90, "uid-2");
    assert.deepEqual([job.facts.shutdownRequested, job.shutdownNodeUid, job.podAttempts], [40, "uid-1", 1]);
    const unknown = newJob("worker-1", 0);
    shutdownAdopted(unknown, 40, undefined);
    shutdownAdopted(unknown, 50, "uid-3");
    assert.equal(unknown.shutdownNodeUid, "uid-3", "a Node learned later is remembered");
  });

  it("names no Node for an undo of a record written on none", () => {
    assert.equal(newUndo(7, { nodes: [], reason: "its DeleteNodes failed", quiet: true }).node, "");
  });
});

describe("a power-off job's revival watch", () => {
  // Read through a function: an assertion on the property would narrow it for the rest of the test.
  const revivalOf = (job: PowerOffJob): Revival | undefined => job.revival;

  it("records nothing before the watch began, and what is left once it did, kept or replaced as asked", () => {
    const job = newJob("worker-1", 0);
    revivalLeft(job, { at: 1, how: "power-on" });
    revivalTold(job, 1);
    assert.equal(revivalOf(job), undefined);
    revivalStarted(job, 5);
    revivalLeft(job, { at: 6, how: "power-cycle" });
    revivalLeft(job, { at: 7, how: "power-on" }, true);
    assert.deepEqual(revivalOf(job)?.onLeft, { at: 6, how: "power-cycle" }, "kept");
    revivalLeft(job, { at: 8, how: "power-on" });
    revivalTold(job, 9);
    assert.deepEqual(job.revival, { since: 5, onLeft: { at: 8, how: "power-on" }, toldAt: 9 });
  });
});
