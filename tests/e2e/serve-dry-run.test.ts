// `serve --dry-run` end to end: plugpool wired as in production but observing only, over gRPC (grpc-js), with
// emulated plugs and a real kube-apiserver. A scale-up and a DeleteNodes leave every plug, pod, Node and record
// as they were, fail towards the caller, and leave Events saying what a real run would have done.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { status } from "@grpc/grpc-js";
import type { CoreV1Api, CoreV1Event } from "@kubernetes/client-node";
import { loadConfig } from "../../src/app/config/index.ts";
import { createLogger } from "../../src/app/logger.ts";
import { serve, type Served } from "../../src/app/serve.ts";
import { POWER_OFF_ANNOTATION } from "../../src/domain/index.ts";
import { POWER_RECORDS_CONFIGMAP, recordKey } from "../../src/adapters/kubernetes/power-records.ts";
import { TEMPLATE_SLICES_CONFIGMAP } from "../../src/adapters/kubernetes/template-slices.ts";
import type { ControlPlane } from "../harness/control-plane/index.ts";
import { startPlugEmulator, type EmulatedPlug } from "../harness/plug-emulator/index.ts";
import { createCloudProviderClient, type CloudProviderClient } from "../harness/grpc-client.ts";
import { eventually } from "../harness/eventually.ts";
import { NAMESPACE, plugpoolConfig, PREFIX, startCluster } from "../harness/site/index.ts";
import { nodeBody } from "../adapters/kubernetes/support.ts";
import { InstanceStatus_InstanceState } from "../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";

describe("plugpool serve --dry-run (real apiserver, emulated plugs)", () => {
  let plane: ControlPlane;
  let plugs: EmulatedPlug[];
  let served: Served;
  let client: CloudProviderClient;
  let core: CoreV1Api;

  const switchRequests = (plug: EmulatedPlug | undefined) => (plug?.calls ?? []).filter((c) => /\/turn_(on|off)|\/toggle/.test(c.path));
  const eventsOn = async (node: string, reason: string): Promise<CoreV1Event[]> =>
    (await core.listNamespacedEvent({ namespace: "default" })).items.filter((e) => e.involvedObject.name === node && e.reason === reason);
  /** plugpool's ConfigMaps, each as name and resourceVersion. */
  const ownConfigMaps = async (): Promise<string[]> =>
    (await core.listNamespacedConfigMap({ namespace: NAMESPACE })).items
      .filter((c) => c.metadata?.name === POWER_RECORDS_CONFIGMAP || c.metadata?.name === TEMPLATE_SLICES_CONFIGMAP)
      .map((c) => `${c.metadata?.name ?? ""}@${c.metadata?.resourceVersion ?? ""}`);
  let recordsBefore: string[] = [];

  before(async () => {
    ({ plane, core } = await startCluster({ controllers: false, setup: "bare" }));
    plugs = await Promise.all([
      startPlugEmulator({ switches: [{ name: "Relay" }] }),
      startPlugEmulator({ switches: [{ name: "Relay" }] }),
      startPlugEmulator({ switches: [{ name: "Relay" }] }),
    ]);
    // worker-1 runs, drained by CA (its taint); worker-2 is off; worker-3 was switched on by plugpool before this
    // run (its record stands) and has not registered.
    plugs[0]?.setState("Relay", true);
    plugs[2]?.setState("Relay", true);
    await core.createNamespacedConfigMap({
      namespace: NAMESPACE,
      body: { metadata: { name: POWER_RECORDS_CONFIGMAP }, data: { [recordKey("power-on", "worker-3")]: JSON.stringify({ at: Date.now(), why: "scale-up" }) } },
    });
    recordsBefore = await ownConfigMaps();
    await core.createNode({
      body: nodeBody({
        name: "worker-1",
        providerID: `${PREFIX}worker-1`,
        taints: [{ key: "ToBeDeletedByClusterAutoscaler", value: "1700000000", effect: "NoSchedule" }],
      }),
    });
    const config = loadConfig(
      plugpoolConfig({
        groups: [{ id: "workers", nodes: plugs.map((plug, i) => ({ name: `worker-${i + 1}`, plug: { url: plug.url, switch: "Relay" } })) }],
        deviceTimeout: "1s",
      }),
      {},
    );
    const logger = createLogger({ level: process.env.PLUGPOOL_TEST_LOG ?? "info", silent: process.env.PLUGPOOL_TEST_LOG === undefined });
    served = await serve(config, { kubeConfig: plane.admin(), logger, version: "test", dryRun: true });
    client = createCloudProviderClient(`127.0.0.1:${served.grpcPort}`);
    assert.equal((await client.call("refresh", {})).error, undefined);
  });

  after(async () => {
    client.close();
    await served.stop();
    await Promise.all(plugs.map((p) => p.close()));
    await plane.stop();
  });

  it("says on /readyz and in a metric that it only observes", async () => {
    const ready = await fetch(`http://127.0.0.1:${served.opsPort}/readyz`);
    assert.equal(ready.status, 200);
    assert.match(await ready.text(), /^ok; dry run: observing only/);
    const metrics = await (await fetch(`http://127.0.0.1:${served.opsPort}/metrics`)).text();
    assert.match(metrics, /^plugpool_dry_run 1$/m);
  });

  it("answers cluster-autoscaler from what it reads: the running node and the group", async () => {
    const { response } = await client.call("nodeGroupNodes", { id: "workers" });
    assert.deepEqual(response?.instances.map((i) => [i.id, i.status?.instanceState]), [
      [`${PREFIX}worker-1`, InstanceStatus_InstanceState.instanceRunning],
      [`${PREFIX}worker-3`, InstanceStatus_InstanceState.instanceCreating],
    ]);
    assert.equal((await client.call("nodeGroupTargetSize", { id: "workers" })).response?.targetSize, 2);
  });

  it("fails a scale-up without switching any plug, and records DryRunPowerOn on the machine a real run would use", async () => {
    const { error } = await client.call("nodeGroupIncreaseSize", { id: "workers", delta: 1 });
    assert.equal(error?.code, status.UNAVAILABLE);
    assert.match(decodeURIComponent(error.details), /switched on 0 of 1; worker-2: dry run: the plug of worker-2 was not switched on/);
    assert.deepEqual(plugs.map((p) => p.state("Relay")), [true, false, true]);
    assert.deepEqual(plugs.flatMap(switchRequests), [], "no switch request reached a plug");
    assert.equal((await client.call("nodeGroupTargetSize", { id: "workers" })).response?.targetSize, 2, "no instance that never comes");
    await eventually("the DryRunPowerOn Event on worker-2", async () => {
      const [event] = await eventsOn("worker-2", "DryRunPowerOn");
      assert.equal(event?.type, "Normal");
      assert.match(event.message ?? "", /^dry run: would switch the plug of worker-2 on now; nothing was sent/);
    });
    assert.deepEqual(await eventsOn("worker-2", "PoweredOn"), []);
  });

  it("fails DeleteNodes for the drained node: no pod, no cut, the Node kept unmarked, and DryRunPowerOff recorded", async () => {
    const { error } = await client.call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: "worker-1", providerID: `${PREFIX}worker-1` }],
    });
    assert.equal(error?.code, status.UNAVAILABLE);
    assert.match(decodeURIComponent(error.details), /worker-1: recording the power-off: dry run: the power-off of node worker-1 was not started/);
    await eventually("the DryRunPowerOff Event on worker-1", async () => {
      const [event] = await eventsOn("worker-1", "DryRunPowerOff");
      assert.match(event?.message ?? "", /would start the power-off of node worker-1 now .*cluster-autoscaler is told the deletion failed/);
    });
    // Give the power-off runner time to act if it were going to (it is woken by the failed call's undo).
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.deepEqual(plugs.map((p) => p.state("Relay")), [true, false, true]);
    assert.deepEqual(plugs.flatMap(switchRequests), []);
    const node = await core.readNode({ name: "worker-1" });
    assert.equal(node.metadata?.annotations?.[POWER_OFF_ANNOTATION], undefined);
    assert.deepEqual((await core.listNamespacedPod({ namespace: NAMESPACE })).items, []);
    assert.deepEqual((await core.listNode()).items.map((n) => n.metadata?.name), ["worker-1"]);
    const { response } = await client.call("nodeGroupNodes", { id: "workers" });
    assert.equal(response?.instances[0]?.status?.instanceState, InstanceStatus_InstanceState.instanceRunning, "still running");
  });

  it("fails DeleteNodes for a machine that never registered: the check at the plug allows the cut, which is told, not made", async () => {
    // What CA sends after --max-node-provision-time: its fake node for the instance.
    const { error } = await client.call("nodeGroupDeleteNodes", {
      id: "workers",
      nodes: [{ name: `${PREFIX}worker-3`, providerID: `${PREFIX}worker-3` }],
    });
    assert.equal(error?.code, status.UNAVAILABLE);
    assert.match(decodeURIComponent(error.details), /worker-3: dry run: the plug of worker-3 was not switched off/);
    assert.deepEqual(plugs.map((p) => p.state("Relay")), [true, false, true]);
    assert.deepEqual(plugs.flatMap(switchRequests), []);
    await eventually("the DryRunPlugOff Event on worker-3", async () => {
      const [event] = await eventsOn("worker-3", "DryRunPlugOff");
      assert.match(event?.message ?? "", /would switch the plug of worker-3 off now \(the check at the plug allowed it\)/);
    });
    assert.deepEqual(await eventsOn("worker-3", "PlugOff"), []);
    const { response } = await client.call("nodeGroupNodes", { id: "workers" });
    assert.equal(response?.instances[1]?.status?.instanceState, InstanceStatus_InstanceState.instanceCreating, "the record stands");
  });

  it("never writes its records or template slices", async () => {
    assert.deepEqual(await ownConfigMaps(), recordsBefore);
    assert.equal(recordsBefore.length, 1);
  });
});
