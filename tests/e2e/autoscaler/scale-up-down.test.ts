// The real cluster-autoscaler drives plugpool through a whole cycle: scale-up from zero for a pending pod,
// scale-down once the pod is gone, and a power-off that survives a restart of plugpool.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { eventually } from "../../harness/eventually.ts";
import { NAMESPACE, PREFIX, startSite, type Site } from "../../harness/site/index.ts";
import { deleteAllPods, deletePod, nodeNames, runPoolPod, scenario } from "./scenario.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: scale-up and scale-down", { skip: autoscalerMissing() }, () => {
  let site: Site;
  const diagnostics = (): string => site.diagnostics();

  const powerOffPods = async (): Promise<string[]> =>
    (await site.core.listNamespacedPod({ namespace: NAMESPACE })).items.map((p) => p.metadata?.name ?? "");

  before(async () => {
    site = await startSite({
      machines: [
        { name: "worker-1", version: "2026.7", platform: "esp32", powerSensor: true },
        { name: "worker-2", version: "2025.12", platform: "esp8266" },
      ],
      // Long enough for the restart scenario to stop plugpool while the OS is still shutting down.
      shutdownDelayMs: 3000,
    });
  });
  after(async () => {
    await site.stop();
  });

  it("scales up from zero for a pending pod that selects the pool label", scenario("scale-up from zero", diagnostics, async () => {
    assert.deepEqual(await nodeNames(site.core), []);
    const node = await runPoolPod(site.core, "scale-up");
    assert.equal(node, "worker-1", "the first machine in config order");
    assert.equal(site.caLog(/Scale-up: setting group workers size to 1/).length, 1);
    assert.deepEqual(site.plugpool.events("powered-on").map((e) => e.machine), ["worker-1"]);
    assert.equal(site.plug("worker-1").state("Relay"), true);
    assert.equal(site.plug("worker-2").state("Relay"), false);
    assert.deepEqual(site.history("worker-1"), ["booting", "running"]);
    const registered = await site.core.readNode({ name: "worker-1" });
    assert.equal(registered.spec?.providerID, `${PREFIX}worker-1`);
  }));

  it("scales down the node once its pod is gone: taint, DeleteNodes, power-off, plug off, Node deleted", scenario("scale-down", diagnostics, async () => {
    const node = await runPoolPod(site.core, "scale-down");
    const historyBefore = site.history(node).length;
    await deleteAllPods(site.core);
    await eventually(`${node} powered off and its Node deleted`, async () => {
      assert.equal(site.plug(node).state("Relay"), false);
      assert.deepEqual(await nodeNames(site.core), []);
      assert.deepEqual(await powerOffPods(), []);
    }, 90_000, 250);
    assert.equal(site.caLog(new RegExp(`Scale-down: removing empty node "${node}"`)).length, 1);
    assert.deepEqual(site.plugpool.events("refused"), []);
    assert.ok(
      site.plugpool.events("power-off-step").some((e) => e.machine === node && e.step === "check-taint" && e.outcome === "done"),
      "plugpool found CA's ToBeDeleted taint on the node it was asked to delete",
    );
    assert.deepEqual(site.history(node).slice(historyBefore), ["shutting-down", "halted", "off"]);
    // The power-off ends at the reconciler's next pass after the view shows the Node gone (up to a second later).
    await eventually("plugpool's power-off events", () => {
      for (const event of ["power-off-started", "plug-off", "node-deleted", "power-off-finished"]) {
        assert.ok(site.plugpool.events(event).some((e) => e.machine === node), `plugpool event ${event}`);
      }
    }, 10_000, 100);
    const reasons = (await site.core.listNamespacedEvent({ namespace: "default" })).items
      .filter((e) => e.involvedObject.name === node).map((e) => e.reason);
    for (const reason of ["ScaleDown", "PowerOffStarted", "PlugOff", "NodeDeleted"]) {
      assert.ok(reasons.includes(reason), `Event ${reason} in ${reasons.join(", ")}`);
    }
    const { response } = await site.client.call("nodeGroupTargetSize", { id: "workers" });
    assert.equal(response?.targetSize, 0);
  }));

  it("resumes a power-off after plugpool restarts in its middle, and finishes it", scenario("restart mid power-off", diagnostics, async () => {
    const node = await runPoolPod(site.core, "restart");
    const startedBefore = site.plugpool.events("power-off-started").length;
    await deletePod(site.core, "restart");
    await eventually("the power-off pod", async () => {
      assert.equal((await powerOffPods()).length, 1);
    }, 60_000, 50);
    await site.plugpool.stop();
    assert.equal(site.machines.state(node), "shutting-down", "stopped while the OS shuts down");
    await eventually(`${node} halted`, () => {
      assert.equal(site.machines.state(node), "halted");
    }, 10_000);
    assert.equal(site.plug(node).state("Relay"), true, "nobody cuts power while plugpool is down");
    await site.plugpool.start();
    await eventually(`${node} powered off and its Node deleted`, async () => {
      assert.equal(site.plug(node).state("Relay"), false);
      assert.deepEqual(await nodeNames(site.core), []);
      assert.deepEqual(await powerOffPods(), []);
    }, 60_000, 250);
    const started = site.plugpool.events("power-off-started").slice(startedBefore);
    assert.equal(started.at(-1)?.resumed, true, "the new plugpool resumed the power-off");
    // CA's loops failed at Refresh meanwhile (gRPC Unavailable), and it carried on once plugpool was back.
    assert.ok(site.caLog(/Failed to refresh cloud provider config/).length > 0);
    assert.ok(site.autoscaler.running(), "CA survived plugpool's absence");
  }));
});
