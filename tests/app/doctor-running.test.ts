// doctor reads a running plugpool's metrics (the quarantine is in its memory): here a real pool over the
// fakes, with a machine quarantined, behind the real ops server.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Gauge } from "prom-client";
import { checkRunningInstance, opsUrl } from "../../src/app/doctor-running.ts";
import { createMetrics } from "../../src/app/metrics.ts";
import { startOpsServer } from "../../src/app/ops-server.ts";
import { loadConfig, type AppConfig } from "../../src/app/config/index.ts";
import { World } from "../harness/fakes/world.ts";

function configOn(port: number): AppConfig {
  return loadConfig(
    [
      `opsListen: 0.0.0.0:${port}`,
      'providerIDPrefix: "k3s://"',
      "nodeGroups:",
      "  - { id: workers, maxSize: 1, template: { cpu: '4', memory: 8Gi }, nodes: [{ name: worker-1, plug: { url: 'http://plug-1.lan', switch: Relay } }] }",
    ].join("\n"),
    {},
  );
}

describe("checkRunningInstance()", () => {
  it("reaches a wildcard ops address on loopback", () => {
    assert.equal(opsUrl(configOn(8087)), "http://127.0.0.1:8087/metrics");
  });

  it("lists every machine the running plugpool has quarantined", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    await w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]);
    assert.equal(w.pool.quarantine().length, 1);
    const metrics = createMetrics();
    metrics.observePool(w.pool, w.config);
    const ops = await startOpsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry, readiness: () => [], liveness: () => [] });
    try {
      const rows = await checkRunningInstance(configOn(ops.port));
      assert.equal(rows[0]?.status, "ok");
      assert.deepEqual(
        rows.slice(1).map((r) => [r.subject, r.status]),
        [["machine worker-1", "warn"]],
      );
      assert.match(rows[1]?.detail ?? "", /1 failed boot/);
    } finally {
      await ops.close();
    }
  });

  it("warns that the running plugpool only observes when it serves with --dry-run", async () => {
    const metrics = createMetrics();
    const dryRun = new Gauge({ name: "plugpool_dry_run", help: "dry run", registers: [metrics.registry] });
    const ops = await startOpsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry, readiness: () => [], liveness: () => [] });
    try {
      dryRun.set(1);
      const [row] = await checkRunningInstance(configOn(ops.port));
      assert.equal(row?.status, "warn");
      assert.match(row.detail, /^serving in dry run \(--dry-run\): observing only, no plug is switched; instances none$/);
      dryRun.set(0);
      assert.deepEqual((await checkRunningInstance(configOn(ops.port))).map((r) => [r.status, r.detail]), [["ok", "serving; instances none"]]);
    } finally {
      await ops.close();
    }
  });

  it("is content when no plugpool answers", async () => {
    const rows = await checkRunningInstance(configOn(1), 300);
    assert.deepEqual(rows.map((r) => r.status), ["ok"]);
    assert.match(rows[0]?.detail ?? "", /no plugpool answers/);
  });

  it("stops reading an answer that never ends long before its timeout, without its memory", async () => {
    const chunk = Buffer.alloc(1024 * 1024, "# filler\n");
    const endless = createServer((_req, res) => {
      const more = (): void => {
        while (res.write(chunk));
      };
      res.on("drain", more);
      more();
    });
    await new Promise<void>((resolve) => endless.listen(0, "127.0.0.1", resolve));
    try {
      const started = performance.now();
      const rows = await checkRunningInstance(configOn((endless.address() as AddressInfo).port), 30_000);
      assert.match(rows[0]?.detail ?? "", /no plugpool answers/);
      assert.ok(performance.now() - started < 10_000, `took ${performance.now() - started} ms`);
    } finally {
      endless.closeAllConnections();
      await new Promise((resolve) => endless.close(resolve));
    }
  });
});
