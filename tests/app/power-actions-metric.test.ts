// plugpool_power_actions_total as Prometheus needs it: every group's count of every action from the start, so
// that increase() sees the first refusal (a series' first sample is invisible to it).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createMetrics, POWER_ACTIONS } from "../../src/app/metrics.ts";
import { createReporter } from "../../src/app/reporting.ts";
import { createLogger } from "../../src/app/logger.ts";
import { World } from "../harness/fakes/world.ts";

const actions = (text: string): string[] => text.split("\n").filter((l) => l.startsWith("plugpool_power_actions_total{"));

describe("plugpool_power_actions_total", () => {
  it("exports every group's count of every action at 0 before anything happened", async () => {
    const w = new World({ groups: [{ id: "workers", machines: ["w1"] }, { id: "gpu", machines: ["g1"] }] });
    const metrics = createMetrics();
    metrics.observePool(w.pool, w.config);
    const lines = actions(await metrics.registry.metrics());
    assert.equal(lines.length, 2 * POWER_ACTIONS.length);
    for (const group of ["workers", "gpu"]) {
      for (const action of POWER_ACTIONS) assert.ok(lines.includes(`plugpool_power_actions_total{group="${group}",action="${action}"} 0`), `${group} ${action}`);
    }
  });

  it("counts a reported action on its group", async () => {
    const w = new World({ groups: [{ id: "workers", machines: ["w1"] }] });
    const metrics = createMetrics();
    metrics.observePool(w.pool, w.config);
    const reporter = createReporter({ logger: createLogger({ level: "error" }), metrics, config: w.config });
    reporter.report({ type: "refused", machine: "w1", rule: "held", detail: "held" });
    assert.ok(actions(await metrics.registry.metrics()).includes('plugpool_power_actions_total{group="workers",action="refused"} 1'));
  });
});
