// plugpool in dry run (observe only) under the real cluster-autoscaler: CA's scale-up and scale-down requests
// reach plugpool, fail there without touching a plug, a pod or a Node, and leave DryRun Events; CA backs off and
// takes its deletion taint off again, as the README says.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { eventually } from "../../harness/eventually.ts";
import { startEnvironment, type Environment } from "./environment.ts";
import { createPoolPod, deleteAllPods, nodeNames, readPod, scenario, turnOffRequests } from "./scenario.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool in dry run", { skip: autoscalerMissing() }, () => {
  let env: Environment;
  const diagnostics = (): string => env.diagnostics();
  const reasons = async (object: string): Promise<string[]> =>
    (await env.core.listEventForAllNamespaces({ fieldSelector: `involvedObject.name=${object}` })).items.map((e) => e.reason ?? "");
  const turnOnRequests = (machine: string) => env.plug(machine).calls.filter((c) => /\/turn_on(\?|$)/.test(c.path));

  before(async () => {
    env = await startEnvironment({ machines: [{ name: "worker-1" }, { name: "worker-2" }], dryRun: true });
  });
  after(async () => {
    await env.stop();
  });

  it("tells which machine a scale-up would power on, switches none, and CA records the failed scale-up", scenario("dry-run scale-up", diagnostics, async () => {
    await createPoolPod(env.core, "pending");
    await eventually("DryRunPowerOn on worker-1 and CA's failed scale-up", async () => {
      assert.ok((await reasons("worker-1")).includes("DryRunPowerOn"));
      assert.ok(env.caLog(/failed to increase node group size/).length > 0);
    }, 60_000, 250);
    assert.equal(env.plug("worker-1").state("Relay"), false);
    assert.equal(env.plug("worker-2").state("Relay"), false);
    assert.deepEqual([...turnOnRequests("worker-1"), ...turnOnRequests("worker-2")], []);
    assert.deepEqual(env.history("worker-1"), []);
    assert.equal((await readPod(env.core, "pending")).status?.phase, "Pending");
    assert.ok(env.caLog(/Scale-up: setting group workers size to 1/).length > 0, "CA asked plugpool for a node");
    await deleteAllPods(env.core);
  }));

  it("refuses CA's deletion of an unneeded node: the machine keeps its power and Node, and CA untaints it", scenario("dry-run scale-down", diagnostics, async () => {
    // A machine running before plugpool was installed: switched on by hand.
    env.plug("worker-2").setState("Relay", true);
    await eventually("worker-2 registered", async () => {
      assert.deepEqual(await nodeNames(env.core), ["worker-2"]);
    }, 30_000, 250);
    await eventually("DryRunPowerOff on worker-2 and CA's failed scale-down", async () => {
      const seen = await reasons("worker-2");
      assert.ok(seen.includes("DryRunPowerOff"), seen.join(", "));
      assert.ok(seen.includes("ScaleDownFailed"), seen.join(", "));
    }, 60_000, 250);
    assert.ok(env.caLog(/Scale-down: couldn't delete empty node "worker-2"/).length > 0);
    await eventually("CA took its taint off worker-2", async () => {
      const node = await env.core.readNode({ name: "worker-2" });
      assert.ok(!(node.spec?.taints ?? []).some((t) => t.key === "ToBeDeletedByClusterAutoscaler"));
    }, 30_000, 100);
    assert.equal(env.plug("worker-2").state("Relay"), true);
    assert.deepEqual(turnOffRequests(env.plug("worker-2")), []);
    assert.equal(env.machines.state("worker-2"), "running");
    assert.deepEqual((await env.core.listNamespacedPod({ namespace: "plugpool" })).items, [], "no power-off pod");
    assert.deepEqual(await nodeNames(env.core), ["worker-2"]);
  }));
});
