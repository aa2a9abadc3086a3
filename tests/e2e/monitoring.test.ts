// deploy/monitoring's alerts in a real Prometheus scraping a real plugpool: `plugpool serve` as a process with
// an emulated plug and a real kube-apiserver, Prometheus (built by tests/harness/prometheus/build.sh) loading
// the PrometheusRule's rules unchanged. A machine is switched on and never boots; cluster-autoscaler (its gRPC
// calls, made here) drops it after its provision time; plugpool cuts and quarantines it, and
// PlugpoolMachineQuarantined fires in Prometheus.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InstanceStatus_InstanceState } from "../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import type { ControlPlane } from "../harness/control-plane/index.ts";
import { startPlugEmulator, type EmulatedPlug } from "../harness/plug-emulator/index.ts";
import type { CloudProviderClient } from "../harness/grpc-client.ts";
import { ruleGroupsOf, startPrometheus, writePrometheusConfig, type RunningPrometheus } from "../harness/prometheus/index.ts";
import { eventually } from "../harness/eventually.ts";
import { plugpoolConfig, PREFIX, SOURCE, startCluster, startPlugpoolProcess, type PlugpoolProcess } from "../harness/site/index.ts";

const rulesManifest = new URL("../../deploy/monitoring/prometheusrule.yaml", import.meta.url).pathname;

describe("deploy/monitoring in a real Prometheus scraping plugpool", () => {
  let plane: ControlPlane;
  let plug: EmulatedPlug;
  let dir: string;
  let plugpool: PlugpoolProcess;
  let prometheus: RunningPrometheus;
  let client: CloudProviderClient;

  before(async () => {
    ({ plane } = await startCluster({ controllers: false, setup: "bare" }));
    // No machine behind the plug: switched on, nothing ever boots.
    plug = await startPlugEmulator();
    dir = mkdtempSync(join(tmpdir(), "plugpool-monitoring-e2e-"));
    const config = join(dir, "config.yaml");
    writeFileSync(config, plugpoolConfig({ groups: [{ id: "workers", nodes: [{ name: "worker-1", plug: { url: plug.url, switch: "Relay" } }] }] }));
    // From its source, at its default log level.
    plugpool = await startPlugpoolProcess({ entry: SOURCE, logLevel: "info", configPath: config, kubeconfigPath: plane.kubeconfigPath });
    client = plugpool.client;

    // The rules exactly as deploy/monitoring ships them.
    prometheus = await startPrometheus(writePrometheusConfig(dir, {
      rules: ruleGroupsOf(readFileSync(rulesManifest, "utf8")),
      targets: [{ job: "plugpool", address: `127.0.0.1:${plugpool.opsPort}`, labels: { namespace: "plugpool", pod: "cluster-autoscaler-0" } }],
    }), dir);
  });

  after(async () => {
    await prometheus.stop();
    await plugpool.stop();
    await plug.close();
    await plane.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("scrapes plugpool and evaluates every rule without error, with no alert on a healthy plugpool", async () => {
    await eventually("plugpool scraped", async () => {
      const { result } = await prometheus.api<{ result: { value: [number, string] }[] }>("/api/v1/query?query=plugpool_cluster_view_current");
      assert.equal(result[0]?.value[1], "1");
    }, 30_000, 500);
    // Every rule has been evaluated at least once after the first scrape.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const rules = await prometheus.rules();
    assert.ok(rules.length >= 12);
    assert.deepEqual(rules.filter((r) => r.health !== "ok").map((r) => [r.name, r.health, r.lastError]), []);
    assert.deepEqual((await prometheus.alerts()).filter((a) => a.labels.alertname?.startsWith("Plugpool")), []);
  });

  it("fires PlugpoolMachineQuarantined once a machine switched on never booted and CA dropped it", async () => {
    assert.equal((await client.call("refresh", {})).error, undefined);
    assert.equal((await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 })).error, undefined);
    assert.equal(plug.state("Relay"), true);
    const { response } = await client.call("nodeGroupNodes", { id: "workers" });
    assert.deepEqual(response?.instances.map((i) => [i.id, i.status?.instanceState]), [[`${PREFIX}worker-1`, InstanceStatus_InstanceState.instanceCreating]]);
    // Still creating: no alert while the machine may yet boot.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.deepEqual((await prometheus.alerts()).filter((a) => a.labels.alertname === "PlugpoolMachineQuarantined"), []);

    // What cluster-autoscaler sends after --max-node-provision-time: its fake node for the instance.
    const dropped = await client.call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: `${PREFIX}worker-1`, providerID: `${PREFIX}worker-1`, annotations: { "k8s.io/cluster-autoscaler/fake-node-reason": "unregistered" } }],
    });
    assert.equal(dropped.error, undefined);
    assert.equal(plug.state("Relay"), false);
    const droppedAt = performance.now();

    const firingNow = async () =>
      (await prometheus.alerts()).find((a) => a.labels.alertname === "PlugpoolMachineQuarantined" && a.state === "firing");
    await eventually("PlugpoolMachineQuarantined firing in Prometheus", async () => {
      assert.ok(await firingNow());
    }, 30_000, 250);
    const seconds = (performance.now() - droppedAt) / 1000;
    const firing = await firingNow();
    assert.ok(firing);
    assert.deepEqual(firing.labels, { alertname: "PlugpoolMachineQuarantined", machine: "worker-1", severity: "warning" });
    assert.equal(firing.annotations.summary, "worker-1 was switched on and never booted; failed boots in a row: 1.");
    assert.match(firing.annotations.description ?? "", /involvedObject\.name=worker-1/);
    console.log(`# PlugpoolMachineQuarantined firing ${seconds.toFixed(1)} s after cluster-autoscaler dropped the machine`);
  });
});
