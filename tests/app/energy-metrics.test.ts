// The energy metrics as a scrape shows them: read from a real pool over the fakes at scrape time.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createMetrics } from "../../src/app/metrics.ts";
import { createReporter } from "../../src/app/reporting.ts";
import { createLogger } from "../../src/app/logger.ts";
import { World } from "../harness/fakes/world.ts";

const S = 1000;

function series(text: string, name: string): string[] {
  return text.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}

describe("energy metrics", () => {
  it("export plug state, watts, time on and energy per machine, and leave out what is unknown", async () => {
    const w = new World({
      groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], sensors: ["worker-1"], idleWatts: { "worker-2": 36 } }],
      on: ["worker-1"],
      poweredByPlugpool: ["worker-1"],
    });
    const metrics = createMetrics();
    metrics.observePool(w.pool, w.config);
    w.power.setWatts(w.machine("worker-1").power, 90);
    w.power.setFault(w.machine("worker-3").power, "unreachable");
    await w.pool.refresh();
    w.clock.advance(100 * S);
    await w.pool.refresh();
    const text = await metrics.registry.metrics();
    assert.deepEqual(series(text, "plugpool_plug_on"), [
      'plugpool_plug_on{group="workers",machine="worker-1"} 1',
      'plugpool_plug_on{group="workers",machine="worker-2"} 0',
    ]);
    assert.deepEqual(series(text, "plugpool_machine_power_watts"), ['plugpool_machine_power_watts{group="workers",machine="worker-1"} 90']);
    assert.deepEqual(series(text, "plugpool_machine_powered_on_seconds_total"), [
      'plugpool_machine_powered_on_seconds_total{group="workers",machine="worker-1"} 100',
      'plugpool_machine_powered_on_seconds_total{group="workers",machine="worker-2"} 0',
      'plugpool_machine_powered_on_seconds_total{group="workers",machine="worker-3"} 0',
    ]);
    assert.deepEqual(series(text, "plugpool_machine_energy_used_kwh_total"), [
      `plugpool_machine_energy_used_kwh_total{group="workers",machine="worker-1"} ${(90 * 100) / 3_600_000}`,
    ]);
    assert.deepEqual(series(text, "plugpool_machine_energy_avoided_kwh_total"), [
      `plugpool_machine_energy_avoided_kwh_total{group="workers",machine="worker-2"} ${(36 * 100) / 3_600_000}`,
    ]);
    assert.match(text, /# TYPE plugpool_machine_energy_used_kwh_total counter/);
  });

  it("observe the time from plug-on to Ready by group", async () => {
    const w = new World();
    const metrics = createMetrics();
    const logger = createLogger({ silent: true });
    const reporter = createReporter({ logger, metrics, config: w.config });
    reporter.report({ type: "booted", machine: "worker-1", group: "workers", node: "worker-1", durationMs: 75 * S });
    const text = await metrics.registry.metrics();
    assert.deepEqual(series(text, "plugpool_power_on_to_ready_seconds_bucket").filter((l) => /le="(60|90)"/.test(l)), [
      'plugpool_power_on_to_ready_seconds_bucket{le="60",group="workers"} 0',
      'plugpool_power_on_to_ready_seconds_bucket{le="90",group="workers"} 1',
    ]);
    assert.deepEqual(series(text, "plugpool_power_on_to_ready_seconds_sum"), ['plugpool_power_on_to_ready_seconds_sum{group="workers"} 75']);
  });
});
