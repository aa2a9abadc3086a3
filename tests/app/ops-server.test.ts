import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { startOpsServer } from "../../src/app/ops-server.ts";
import { createMetrics } from "../../src/app/metrics.ts";

describe("startOpsServer()", () => {
  it("answers /healthz, /readyz naming what is missing, and /metrics in Prometheus format", async () => {
    const metrics = createMetrics();
    metrics.rpcDuration.observe({ method: "Refresh", code: "ok" }, 0.001);
    let missing: string[] = ["cluster view not synced"];
    const ops = await startOpsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry, readiness: () => missing });
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
});
