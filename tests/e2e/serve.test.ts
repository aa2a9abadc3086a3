// `serve` end to end: plugpool wired as in production, over gRPC (grpc-js), with emulated plugs, simulated
// machines and a real kube-apiserver. The whole power-off runs with NotReady timeout and grace shortened.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { status } from "@grpc/grpc-js";
import type { CoreV1Api } from "@kubernetes/client-node";
import { loadConfig } from "../../src/app/config/index.ts";
import { createLogger } from "../../src/app/logger.ts";
import { serve, type Served } from "../../src/app/serve.ts";
import { callOptions } from "../../src/adapters/kubernetes/api-errors.ts";
import { InstanceStatus_InstanceState } from "../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import type { ControlPlane } from "../harness/control-plane/index.ts";
import { startPlugEmulator, type EmulatedPlug } from "../harness/plug-emulator/index.ts";
import { startMachineSimulator, type MachineSimulator } from "../harness/machine-simulator.ts";
import { createCloudProviderClient, type CallResult, type CloudProviderClient } from "../harness/grpc-client.ts";
import { eventually } from "../harness/eventually.ts";
import { plugpoolConfig, PREFIX, startCluster } from "../harness/site/index.ts";

describe("plugpool serve (real apiserver, emulated plugs, simulated machines)", () => {
  let plane: ControlPlane;
  let plugs: EmulatedPlug[];
  let machines: MachineSimulator;
  let served: Served;
  let client: CloudProviderClient;
  let core: CoreV1Api;
  let syncedToFirstAnswerMs = 0;
  let first: CallResult<"nodeGroups"> | undefined;

  before(async () => {
    ({ plane, core } = await startCluster({ controllers: false, setup: "bare" }));
    plugs = await Promise.all([
      startPlugEmulator({ version: "2026.7", platform: "esp32", switches: [{ name: "Relay", powerSensor: "Power" }] }),
      startPlugEmulator({ version: "2025.12", platform: "esp8266", switches: [{ name: "Relay" }] }),
    ]);
    const config = loadConfig(
      plugpoolConfig({
        groups: [{
          id: "workers",
          labels: { "example.com/pool": "workers" },
          nodes: [
            { name: "worker-1", plug: { url: plugs[0]?.url ?? "", switch: "Relay", powerSensor: "Power" } },
            { name: "worker-2", plug: { url: plugs[1]?.url ?? "", switch: "Relay" } },
          ],
        }],
        deviceTimeout: "1s",
        sections: { powerOff: { notReadyTimeout: "20s", grace: "10s", standbyWatts: 5, standbyWindow: "500ms" } },
      }),
      {},
    );
    machines = startMachineSimulator({
      kubeConfig: plane.admin(),
      providerIDPrefix: PREFIX,
      // worker-2 powers up but never boots (a dead disk, a BIOS stuck on a prompt).
      machines: plugs.map((plug, i) => ({ name: `worker-${i + 1}`, plug, switchName: "Relay", neverBoots: i === 1 })),
      capacity: { cpu: "4", memory: "8Gi", pods: "110" },
      labels: { "example.com/pool": "workers" },
      bootDelayMs: 500,
      shutdownDelayMs: 500,
      heartbeatMs: 1000,
    });
    served = await serve(config, { kubeConfig: plane.admin(), logger: createLogger({ level: process.env.PLUGPOOL_TEST_LOG ?? "info", silent: process.env.PLUGPOOL_TEST_LOG === undefined }), version: "test" });
    const synced = performance.now();
    client = createCloudProviderClient(`127.0.0.1:${served.grpcPort}`);
    first = await client.call("nodeGroups", {});
    syncedToFirstAnswerMs = performance.now() - synced;
  });

  /** As CA scales a node down: its ToBeDeleted taint, then DeleteNodes, accepted once the view sees the taint. */
  async function deleteTainted(name: string): Promise<void> {
    await core.patchNode(
      { name, body: { spec: { taints: [{ key: "ToBeDeletedByClusterAutoscaler", value: "1700000000", effect: "NoSchedule" }] } } },
      callOptions({ contentType: "application/merge-patch+json" }),
    );
    await eventually("the view sees the taint", async () => {
      const { error } = await client.call("nodeGroupDeleteNodes", { id: "workers", nodes: [{ name, providerID: `${PREFIX}${name}` }] });
      assert.equal(error, undefined);
    });
  }

  after(async () => {
    client.close();
    await served.stop();
    await machines.stop();
    await Promise.all(plugs.map((p) => p.close()));
    await plane.stop();
  });

  it("answers its first RPC right after the cluster view has synced", () => {
    // serve() resolves once the cluster view has synced and gRPC listens; the figure is for the note, the
    // goal (≤ 2 s) is measured by `npm run bench`.
    console.log(`serve: first RPC answered ${syncedToFirstAnswerMs.toFixed(0)} ms after serve() returned`);
    assert.equal(first?.error, undefined);
    assert.deepEqual(first?.response?.nodeGroups.map((g) => g.id), ["workers"]);
  });

  it("is ready on /readyz and exports metrics", async () => {
    const ready = await fetch(`http://127.0.0.1:${served.opsPort}/readyz`);
    assert.equal(ready.status, 200);
    const metrics = await (await fetch(`http://127.0.0.1:${served.opsPort}/metrics`)).text();
    assert.match(metrics, /plugpool_instances\{group="workers",state="running"\} 0/);
    assert.match(metrics, /plugpool_records_conflicts_total 0/);
  });

  it("switches a plug on for IncreaseSize, and the instance turns running once its Node registers", async () => {
    assert.equal((await client.call("refresh", {})).error, undefined);
    assert.equal((await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 })).error, undefined);
    assert.equal(plugs[0]?.state("Relay"), true);
    assert.equal(plugs[1]?.state("Relay"), false);
    await eventually("worker-1 running", async () => {
      const { response } = await client.call("nodeGroupNodes", { id: "workers" });
      assert.deepEqual(
        response?.instances.map((i) => [i.id, i.status?.instanceState]),
        [[`${PREFIX}worker-1`, InstanceStatus_InstanceState.instanceRunning]],
      );
    });
  });

  it("refuses DeleteNodes for the node without CA's taint and keeps its power", async () => {
    const { error } = await client.call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: "worker-1", providerID: `${PREFIX}worker-1` }],
    });
    assert.equal(error?.code, status.FAILED_PRECONDITION);
    assert.equal(plugs[0]?.state("Relay"), true);
    assert.equal(machines.state("worker-1"), "running");
  });

  it("runs the whole power-off for the tainted node: pod, NotReady, grace, plug off, Node deleted", async () => {
    await deleteTainted("worker-1");
    const nodes = await client.call("nodeGroupNodes", { id: "workers" });
    assert.equal(nodes.response?.instances[0]?.status?.instanceState, InstanceStatus_InstanceState.instanceDeleting);
    await eventually(
      "worker-1 powered off and its Node deleted",
      async () => {
        assert.equal(plugs[0]?.state("Relay"), false);
        const list = await core.listNode();
        assert.deepEqual(list.items.map((n) => n.metadata?.name), []);
        const pods = await core.listNamespacedPod({ namespace: "plugpool" });
        assert.deepEqual(pods.items.map((p) => p.metadata?.name), []);
      },
      30_000,
    );
    assert.equal(machines.state("worker-1"), "off");
    // The power-off ends once the watch shows the Node gone too, at the runner's next pass.
    await eventually("the power-off over", async () => {
      const { response } = await client.call("nodeGroupNodes", { id: "workers" });
      assert.deepEqual(response?.instances, []);
    }, 10_000);
    assert.equal((await client.call("nodeGroupTargetSize", { id: "workers" })).response?.targetSize, 0);
    const events = await core.listNamespacedEvent({ namespace: "default" });
    const reasons = events.items.filter((e) => e.involvedObject.name === "worker-1").map((e) => e.reason);
    for (const reason of ["PoweredOn", "PowerOffStarted", "PlugOff", "NodeDeleted"]) {
      assert.ok(reasons.includes(reason), `Event ${reason} in ${reasons.join(", ")}`);
    }
    const metrics = await (await fetch(`http://127.0.0.1:${served.opsPort}/metrics`)).text();
    // worker-1's plug has a power sensor: the cut came when the draw reached standby, not after the full grace.
    assert.match(metrics, /plugpool_power_off_grace_ended_total\{how="standby"\} 1/);
    assert.deepEqual(machines.failures(), []);
  });

  it("cuts a machine that never booted when CA drops it, and leaves it out of the next scale-up", async () => {
    assert.equal((await client.call("refresh", {})).error, undefined);
    assert.equal((await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 2 })).error, undefined);
    await eventually("worker-1 running, worker-2 still creating", async () => {
      const { response } = await client.call("nodeGroupNodes", { id: "workers" });
      assert.deepEqual(
        response?.instances.map((i) => [i.id, i.status?.instanceState]),
        [
          [`${PREFIX}worker-1`, InstanceStatus_InstanceState.instanceRunning],
          [`${PREFIX}worker-2`, InstanceStatus_InstanceState.instanceCreating],
        ],
      );
    });
    // What CA sends after --max-node-provision-time: its fake node for the instance.
    const dropped = await client.call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: `${PREFIX}worker-2`, providerID: `${PREFIX}worker-2`, annotations: { "k8s.io/cluster-autoscaler/fake-node-reason": "unregistered" } }],
    });
    assert.equal(dropped.error, undefined);
    assert.equal(plugs[1]?.state("Relay"), false);
    assert.equal((await client.call("nodeGroupTargetSize", { id: "workers" })).response?.targetSize, 1);
    const metrics = await (await fetch(`http://127.0.0.1:${served.opsPort}/metrics`)).text();
    assert.match(metrics, /plugpool_quarantined_machines\{machine="worker-2"\} 1/);
    const again = await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 });
    assert.equal(again.error?.code, status.FAILED_PRECONDITION);
    assert.match(again.error.details, /worker-2/);
    assert.equal(plugs[1].state("Relay"), false);
  });

  it("counts a records write that met another writer's change, and keeps the other's key", async () => {
    // What another plugpool would do: write the records ConfigMap behind this one's back.
    await core.patchNamespacedConfigMap(
      { name: "plugpool-records", namespace: "plugpool", body: { data: { "power-on.elsewhere": JSON.stringify({ at: 1, why: "scale-up" }) } } },
      callOptions({ contentType: "application/merge-patch+json" }),
    );
    await deleteTainted("worker-1");
    // The power-off writes plugpool's records (the end of worker-1's power-on, if nothing before it): the first such
    // write is at the resourceVersion read before the other's.
    await eventually("the conflict counted", async () => {
      const metrics = await (await fetch(`http://127.0.0.1:${served.opsPort}/metrics`)).text();
      assert.match(metrics, /plugpool_records_conflicts_total 1/);
    }, 30_000);
    const records = await core.readNamespacedConfigMap({ name: "plugpool-records", namespace: "plugpool" });
    assert.equal(records.data?.["power-on.elsewhere"], JSON.stringify({ at: 1, why: "scale-up" }));
  });
});
