import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { startOpsServer } from "../../src/app/ops-server.ts";
import { createMetrics } from "../../src/app/metrics.ts";

describe("startOpsServer()", () => {
  it("answers /healthz, /readyz naming what is missing, and /metrics in Prometheus format", async () => {
    const metrics = createMetrics();
    metrics.rpcDuration.observe({ method: "Refresh", code: "ok" }, 0.001);
    let missing: string[] = ["cluster view not synced"];
    const ops = await startOpsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry, readiness: () => missing, liveness: () => [] });
    try {
      const base = `http://127.0.0.1:${ops.port}`;
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      const notReady = await fetch(`${base}/readyz`);
      assert.equal(notReady.status, 503);
      assert.match(await notReady.text(), /cluster view not synced/);
      missing = [];
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      const text = await (await fetch(`${base}/metrics`)).text();
      assert.match(text, /plugpool_rpc_duration_seconds_count\{method="Refresh",code="ok"\} 1/);
      assert.match(text, /^plugpool_process_resident_memory_bytes \d+/m);
      assert.equal((await fetch(`${base}/nope`)).status, 404);
      assert.equal((await fetch(`${base}/metrics`, { method: "POST" })).status, 405);
    } finally {
      await ops.close();
    }
  });

  it("says its notes after ok on a ready /readyz, and only what is missing on an unready one", async () => {
    let missing: string[] = ["gRPC not serving"];
    const ops = await startOpsServer({
      host: "127.0.0.1", port: 0, registry: createMetrics().registry, readiness: () => missing, liveness: () => [], readyNotes: ["dry run: observing only"],
    });
    try {
      const readyz = () => fetch(`http://127.0.0.1:${ops.port}/readyz`);
      assert.equal(await (await readyz()).text(), "not ready: gRPC not serving\n");
      missing = [];
      const ready = await readyz();
      assert.equal(ready.status, 200);
      assert.equal(await ready.text(), "ok; dry run: observing only\n");
      assert.equal(await (await fetch(`http://127.0.0.1:${ops.port}/healthz`)).text(), "ok\n");
    } finally {
      await ops.close();
    }
  });

  it("answers /healthz 503 naming each liveness problem, and 200 once there is none", async () => {
    let problems: string[] = ["power-off pass running for 301 s (more than 300 s)", "something else"];
    const ops = await startOpsServer({ host: "127.0.0.1", port: 0, registry: createMetrics().registry, readiness: () => [], liveness: () => problems });
    try {
      const healthz = () => fetch(`http://127.0.0.1:${ops.port}/healthz`);
      const unhealthy = await healthz();
      assert.equal(unhealthy.status, 503);
      assert.equal(await unhealthy.text(), "unhealthy: power-off pass running for 301 s (more than 300 s), something else\n");
      problems = [];
      const healthy = await healthz();
      assert.equal(healthy.status, 200);
      assert.equal(await healthy.text(), "ok\n");
    } finally {
      await ops.close();
    }
  });
});
