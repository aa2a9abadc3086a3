// deploy/monitoring with the real cluster-autoscaler: Prometheus scrapes plugpool and CA (started with the
// example Deployment's flags) and loads the PrometheusRule's rules unchanged. A pod needs a node, the machine
// plugpool switches on never boots, CA gives it up after its provision time, and PlugpoolMachineQuarantined
// fires; the cluster-autoscaler metrics the alerts read are there, and every rule evaluates cleanly.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../harness/eventually.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";
import { ruleGroupsOf, startPrometheus, writePrometheusConfig, type RunningPrometheus } from "../../harness/prometheus/index.ts";
import { startSite, type Site } from "../../harness/site/index.ts";
import { createPoolPod, scenario } from "./scenario.ts";

const rulesManifest = new URL("../../../deploy/monitoring/prometheusrule.yaml", import.meta.url).pathname;

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("deploy/monitoring with the real cluster-autoscaler: a machine that never boots", { skip: autoscalerMissing() }, () => {
  let site: Site;
  let prometheus: RunningPrometheus;
  let dir: string;
  const diagnostics = (): string => `${site.diagnostics()}\nprometheus:\n${prometheus.process.logTail(20)}`;

  before(async () => {
    site = await startSite({
      machines: [{ name: "worker-1", neverBoots: true }, { name: "worker-2" }],
      autoscalerFlags: {
        // Give a switched-on machine 15 s to register.
        "max-node-provision-time": "15s",
        "initial-node-group-backoff-duration": "5s",
      },
    });
    const served = site.plugpool.served();
    assert.ok(served);
    dir = mkdtempSync(join(tmpdir(), "plugpool-monitoring-ca-"));
    const pod = { namespace: "plugpool", pod: "cluster-autoscaler-0" };
    prometheus = await startPrometheus(writePrometheusConfig(dir, {
      rules: ruleGroupsOf(readFileSync(rulesManifest, "utf8")),
      targets: [
        { job: "plugpool", address: `127.0.0.1:${served.opsPort}`, labels: pod },
        { job: "cluster-autoscaler", address: new URL(site.autoscaler.metricsUrl).host, labels: pod },
      ],
    }), dir);
  });
  after(async () => {
    await prometheus.stop();
    await site.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("fires PlugpoolMachineQuarantined after CA gave the machine up", scenario("monitoring: never boots", diagnostics, async () => {
    // plugpool scraped, and the cluster-autoscaler metrics the alerts read, as CA exports them with the example's flags.
    await eventually("plugpool's and cluster-autoscaler's metrics in Prometheus", async () => {
      const names = await prometheus.api<string[]>("/api/v1/label/__name__/values");
      for (const name of [
        "cluster_autoscaler_cluster_safe_to_autoscale",
        "cluster_autoscaler_unschedulable_pods_count",
        "cluster_autoscaler_node_group_backoff_status",
        "plugpool_cluster_view_current",
      ]) assert.ok(names.includes(name), name);
    }, 30_000, 500);

    await createPoolPod(site.core, "needs-a-node");
    await eventually("worker-1 switched on", () => {
      assert.equal(site.plug("worker-1").state("Relay"), true);
    }, 30_000);
    const switchedOnAt = performance.now();
    assert.deepEqual((await prometheus.alerts()).filter((a) => a.labels.alertname === "PlugpoolMachineQuarantined"), []);
    await eventually("worker-1's plug cut after CA's provisioning timeout", () => {
      assert.equal(site.plug("worker-1").state("Relay"), false);
    }, 60_000, 250);
    const cutAt = performance.now();
    await eventually("PlugpoolMachineQuarantined firing in Prometheus", async () => {
      const firing = (await prometheus.alerts()).filter((a) => a.labels.alertname === "PlugpoolMachineQuarantined" && a.state === "firing");
      assert.deepEqual(firing.map((a) => a.labels), [{ alertname: "PlugpoolMachineQuarantined", machine: "worker-1", severity: "warning" }]);
    }, 30_000, 250);
    const firedAt = performance.now();
    console.log(`# worker-1 switched on; plug cut ${((cutAt - switchedOnAt) / 1000).toFixed(1)} s later; alert firing ${((firedAt - cutAt) / 1000).toFixed(1)} s after the cut`);

    const rules = await prometheus.rules();
    assert.ok(rules.length >= 12);
    assert.deepEqual(rules.filter((r) => r.health !== "ok").map((r) => [r.name, r.health, r.lastError]), []);
    // CA's own absence alert stays silent: its metrics are scraped.
    assert.deepEqual((await prometheus.alerts()).filter((a) => a.labels.alertname?.endsWith("MetricsAbsent")), []);
  }));
});
