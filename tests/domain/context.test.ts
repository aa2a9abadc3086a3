// What the domain's functions share: the group locks, and the lookups that name what is not configured.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PlugpoolError } from "../../src/domain/errors.ts";
import { groupOf, withGroupLock } from "../../src/domain/context.ts";
import { World } from "../harness/fakes/world.ts";

describe("the pool's lookups", () => {
  it("refuses a node group that is not configured, naming it", async () => {
    const w = new World();
    const ctx = w.context();
    let ran = false;
    assert.throws(
      () => withGroupLock(ctx, "gpus", () => { ran = true; return Promise.resolve(); }),
      (error: unknown) => error instanceof PlugpoolError && error.code === "node-group-not-found" && error.message === 'node group "gpus" is not configured',
    );
    assert.equal(ran, false);
    assert.equal(await withGroupLock(ctx, "workers", () => Promise.resolve("held")), "held");
    assert.throws(() => groupOf(ctx, "gpus"), /node group "gpus" is not configured/);
    assert.equal(groupOf(ctx, "workers").id, "workers");
  });
});
