// plugpool in dry run (observe only) under the real cluster-autoscaler: CA's scale-up and scale-down requests
// reach plugpool, fail there without touching a plug, a pod or a Node, and leave DryRun Events; CA backs off and
// takes its deletion taint off again, as the README says.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { eventually } from "../../harness/eventually.ts";
import { startSite, type Site } from "../../harness/site/index.ts";
import { createPoolPod, deleteAllPods, nodeNames, readPod, scenario, turnOffRequests } from "./scenario.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool in dry run", { skip: autoscalerMissing() }, () => {
  let site: Site;
  const diagnostics = (): string => site.diagnostics();
  const reasons = async (object: string): Promise<string[]> =>
    (await site.core.listEventForAllNamespaces({ fieldSelector: `involvedObject.name=${object}` })).items.map((e) => e.reason ?? "");
  const turnOnRequests = (machine: string) => site.plug(machine).calls.filter((c) => /\/turn_on(\?|$)/.test(c.path));

  before(async () => {
    site = await startSite({ machines: [{ name: "worker-1" }, { name: "worker-2" }], dryRun: true });
  });
  after(async () => {
    await site.stop();
  });

  it("tells which machine a scale-up would power on, switches none, and CA records the failed scale-up", scenario("dry-run scale-up", diagnostics, async () => {
    await createPoolPod(site.core, "pending");
    await eventually("DryRunPowerOn on worker-1 and CA's failed scale-up", async () => {
      assert.ok((await reasons("worker-1")).includes("DryRunPowerOn"));
      assert.ok(site.caLog(/failed to increase node group size/).length > 0);
    }, 60_000, 250);
    assert.equal(site.plug("worker-1").state("Relay"), false);
    assert.equal(site.plug("worker-2").state("Relay"), false);
    assert.deepEqual([...turnOnRequests("worker-1"), ...turnOnRequests("worker-2")], []);
    assert.deepEqual(site.history("worker-1"), []);
    assert.equal((await readPod(site.core, "pending")).status?.phase, "Pending");
    assert.ok(site.caLog(/Scale-up: setting group workers size to 1/).length > 0, "CA asked plugpool for a node");
    await deleteAllPods(site.core);
  }));

  it("refuses CA's deletion of an unneeded node: the machine keeps its power and Node, and CA untaints it", scenario("dry-run scale-down", diagnostics, async () => {
    // A machine running before plugpool was installed: switched on by hand.
    site.plug("worker-2").setState("Relay", true);
    await eventually("worker-2 registered", async () => {
      assert.deepEqual(await nodeNames(site.core), ["worker-2"]);
    }, 30_000, 250);
    await eventually("DryRunPowerOff on worker-2 and CA's failed scale-down", async () => {
      const seen = await reasons("worker-2");
      assert.ok(seen.includes("DryRunPowerOff"), seen.join(", "));
      assert.ok(seen.includes("ScaleDownFailed"), seen.join(", "));
    }, 60_000, 250);
    assert.ok(site.caLog(/Scale-down: couldn't delete empty node "worker-2"/).length > 0);
    await eventually("CA took its taint off worker-2", async () => {
      const node = await site.core.readNode({ name: "worker-2" });
      assert.ok(!(node.spec?.taints ?? []).some((t) => t.key === "ToBeDeletedByClusterAutoscaler"));
    }, 30_000, 100);
    assert.equal(site.plug("worker-2").state("Relay"), true);
    assert.deepEqual(turnOffRequests(site.plug("worker-2")), []);
    assert.equal(site.machines.state("worker-2"), "running");
    assert.deepEqual((await site.core.listNamespacedPod({ namespace: "plugpool" })).items, [], "no power-off pod");
    assert.deepEqual(await nodeNames(site.core), ["worker-2"]);
  }));
});
