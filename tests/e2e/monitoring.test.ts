// deploy/monitoring's alerts in a real Prometheus scraping a real plugpool: `plugpool serve` as a process with
// an emulated plug and a real kube-apiserver, Prometheus (built by tests/support/prometheus/build.sh) loading
// the PrometheusRule's rules unchanged. A machine is switched on and never boots; cluster-autoscaler (its gRPC
// calls, made here) drops it after its provision time; plugpool cuts and quarantines it, and
// PlugpoolMachineQuarantined fires in Prometheus.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { credentials } from "@grpc/grpc-js";
import { CoreV1Api } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { InstanceStatus_InstanceState } from "../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import { startControlPlane, type ControlPlane } from "../support/control-plane.ts";
import { startPlugEmulator, type EmulatedPlug } from "../support/plug-emulator/index.ts";
import { createCloudProviderClient, type CloudProviderClient } from "../support/grpc-client.ts";
import { ruleGroupsOf, startPrometheus, writeRuleFile, type RunningPrometheus } from "../support/prometheus.ts";
import { eventually } from "../support/eventually.ts";

const main = new URL("../../src/app/main.ts", import.meta.url).pathname;
const rulesManifest = new URL("../../deploy/monitoring/prometheusrule.yaml", import.meta.url).pathname;
const PREFIX = "k3s://";

interface Alert {
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly state: string;
}

interface RuleStatus {
  readonly name: string;
  readonly health: string;
  readonly lastError?: string;
}

describe("deploy/monitoring in a real Prometheus scraping plugpool", () => {
  let plane: ControlPlane;
  let plug: EmulatedPlug;
  let dir: string;
  let child: ChildProcess;
  let prometheus: RunningPrometheus;
  let client: CloudProviderClient;
  let log = "";
  const lines: Record<string, unknown>[] = [];

  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${prometheus.url}${path}`);
    const body = (await response.json()) as { status: string; data: T };
    assert.equal(body.status, "success", `${path}: ${JSON.stringify(body)}`);
    return body.data;
  };
  const alerts = async () => (await api<{ alerts: Alert[] }>("/api/v1/alerts")).alerts;

  before(async () => {
    plane = await startControlPlane();
    const core = plane.admin().makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: "plugpool" } } });
    // No machine behind the plug: switched on, nothing ever boots.
    plug = await startPlugEmulator();
    dir = mkdtempSync(join(tmpdir(), "plugpool-monitoring-e2e-"));
    const config = join(dir, "config.yaml");
    writeFileSync(
      config,
      [
        "listen: 127.0.0.1:0",
        "opsListen: 127.0.0.1:0",
        `providerIDPrefix: "${PREFIX}"`,
        "nodeGroups:",
        "  - id: workers",
        "    maxSize: 1",
        "    template: { cpu: '4', memory: 8Gi }",
        `    nodes: [{ name: worker-1, plug: { url: "${plug.url}", switch: Relay } }]`,
      ].join("\n"),
    );
    child = spawn(process.execPath, [main, "serve", "--config", config, "--kubeconfig", plane.kubeconfigPath], {
      env: { PATH: process.env.PATH ?? "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stderr?.on("data", (d: Buffer) => (log += d.toString()));
    createInterface({ input: child.stdout ?? process.stdin }).on("line", (line) => {
      log += `${line}\n`;
      lines.push(JSON.parse(line) as Record<string, unknown>);
    });
    await eventually("plugpool serving", () => {
      assert.ok(lines.some((l) => l.message === "serving"), log);
    }, 30_000);
    const serving = lines.find((l) => l.message === "serving");
    client = createCloudProviderClient(String(serving?.grpc), credentials.createInsecure());

    // The rules exactly as deploy/monitoring ships them; scrapes and evaluations every second.
    writeRuleFile(join(dir, "rules.yaml"), ruleGroupsOf(readFileSync(rulesManifest, "utf8")));
    const prometheusConfig = join(dir, "prometheus.yaml");
    writeFileSync(prometheusConfig, stringify({
      global: { scrape_interval: "1s", evaluation_interval: "1s" },
      rule_files: ["rules.yaml"],
      scrape_configs: [{
        job_name: "plugpool",
        static_configs: [{ targets: [`127.0.0.1:${String(serving?.ops)}`], labels: { namespace: "plugpool", pod: "cluster-autoscaler-0" } }],
      }],
    }));
    prometheus = await startPrometheus(prometheusConfig, dir);
  });

  after(async () => {
    client.close();
    await prometheus.stop();
    if (child.exitCode === null) {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
    await plug.close();
    await plane.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("scrapes plugpool and evaluates every rule without error, with no alert on a healthy plugpool", async () => {
    await eventually("plugpool scraped", async () => {
      const { result } = await api<{ result: { value: [number, string] }[] }>("/api/v1/query?query=plugpool_cluster_view_current");
      assert.equal(result[0]?.value[1], "1");
    }, 30_000, 500);
    // Every rule has been evaluated at least once after the first scrape.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const { groups } = await api<{ groups: { rules: RuleStatus[] }[] }>("/api/v1/rules");
    const rules = groups.flatMap((g) => g.rules);
    assert.ok(rules.length >= 12);
    assert.deepEqual(rules.filter((r) => r.health !== "ok").map((r) => [r.name, r.health, r.lastError]), []);
    assert.deepEqual((await alerts()).filter((a) => a.labels.alertname?.startsWith("Plugpool")), []);
  });

  it("fires PlugpoolMachineQuarantined once a machine switched on never booted and CA dropped it", async () => {
    assert.equal((await client.call("refresh", {})).error, undefined);
    assert.equal((await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 })).error, undefined);
    assert.equal(plug.state("Relay"), true);
    const { response } = await client.call("nodeGroupNodes", { id: "workers" });
    assert.deepEqual(response?.instances.map((i) => [i.id, i.status?.instanceState]), [[`${PREFIX}worker-1`, InstanceStatus_InstanceState.instanceCreating]]);
    // Still creating: no alert while the machine may yet boot.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.deepEqual((await alerts()).filter((a) => a.labels.alertname === "PlugpoolMachineQuarantined"), []);

    // What cluster-autoscaler sends after --max-node-provision-time: its fake node for the instance.
    const dropped = await client.call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: `${PREFIX}worker-1`, providerID: `${PREFIX}worker-1`, annotations: { "k8s.io/cluster-autoscaler/fake-node-reason": "unregistered" } }],
    });
    assert.equal(dropped.error, undefined);
    assert.equal(plug.state("Relay"), false);
    const droppedAt = performance.now();

    const firingNow = async () =>
      (await alerts()).find((a) => a.labels.alertname === "PlugpoolMachineQuarantined" && a.state === "firing");
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
