// `plugpool report --prometheus` against a real Prometheus that scrapes a real plugpool ops server (over a pool
// on fakes whose clock runs a minute per quarter second, so the counters grow quickly).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { createMetrics } from "../../src/app/metrics.ts";
import { startOpsServer, type OpsServer } from "../../src/app/ops-server.ts";
import { energyReport, type EnergyReport } from "../../src/app/report.ts";
import { startPrometheus, type RunningPrometheus } from "../harness/prometheus/index.ts";
import { eventually } from "../harness/eventually.ts";
import { World } from "../harness/fakes/world.ts";

describe("plugpool report from a real Prometheus", { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "plugpool-report-"));
  const w = new World({
    groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], sensors: ["worker-1"], idleWatts: { "worker-2": 25 } }],
    on: ["worker-1"],
    poweredByPlugpool: ["worker-1"],
  });
  let ops: OpsServer;
  let prometheus: RunningPrometheus;
  let ticking: NodeJS.Timeout;

  before(async () => {
    w.power.setWatts(w.machine("worker-1").power, 120);
    const metrics = createMetrics();
    metrics.observePool(w.pool, w.config);
    ops = await startOpsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry, readiness: () => [], liveness: () => [] });
    await w.pool.refresh();
    ticking = setInterval(() => {
      w.clock.advance(60_000);
      void w.pool.refresh();
    }, 250);
    const config = join(dir, "prometheus.yml");
    writeFileSync(
      config,
      stringify({
        global: { scrape_interval: "1s", evaluation_interval: "1s" },
        scrape_configs: [{ job_name: "plugpool", static_configs: [{ targets: [`127.0.0.1:${ops.port}`] }] }],
      }),
    );
    prometheus = await startPrometheus(config, dir);
  });

  after(async () => {
    clearInterval(ticking);
    await prometheus.stop();
    await ops.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("adds up hours on, kWh used and kWh avoided per machine from the scraped counters", async () => {
    let report: EnergyReport | undefined;
    await eventually(
      "Prometheus to hold two scrapes of plugpool's counters",
      async () => {
        report = await energyReport({ source: { kind: "prometheus", url: prometheus.url }, windowMs: 60_000 });
        assert.ok((report.rows[0]?.hoursOn ?? 0) > 0, report.text);
      },
      60_000,
      500,
    );
    assert.ok(report);
    assert.deepEqual(
      report.rows.map((r) => [r.machine, Object.keys(r).sort()]),
      [
        ["worker-1", ["group", "hoursOn", "kwhUsed", "machine"]],
        ["worker-2", ["group", "hoursOn", "kwhAvoided", "machine"]],
        ["worker-3", ["group", "hoursOn", "machine"]],
      ],
    );
    const [one, two, three] = report.rows;
    assert.ok(one && two && three);
    // 120 W for every hour on: the counters of one scrape share its timestamps and all three queries are
    // evaluated at one instant, so increase() extrapolates them alike.
    assert.ok(one.kwhUsed !== undefined && one.hoursOn !== undefined && one.hoursOn > 0);
    assert.ok(Math.abs(one.kwhUsed / one.hoursOn / 0.12 - 1) < 1e-9, JSON.stringify(report.rows));
    assert.equal(two.hoursOn, 0);
    assert.ok((two.kwhAvoided ?? 0) > 0, report.text);
    assert.equal(three.hoursOn, 0);
    assert.match(report.text, /^over the last 1m, from Prometheus at http:\/\/127\.0\.0\.1:\d+\n\nGROUP {4}MACHINE {3}HOURS ON/);
  });
});
