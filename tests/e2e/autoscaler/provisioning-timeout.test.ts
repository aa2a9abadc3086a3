// A machine that is switched on but never registers: cluster-autoscaler's provisioning timeout gives it up,
// plugpool cuts its plug, and the next scale-up takes another machine.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { eventually } from "../../harness/eventually.ts";
import { startSite, type Site } from "../../harness/site/index.ts";
import { createPoolPod, readPod, scenario } from "./scenario.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: a machine that never boots", { skip: autoscalerMissing() }, () => {
  let site: Site;
  const diagnostics = (): string => site.diagnostics();

  before(async () => {
    site = await startSite({
      machines: [{ name: "worker-1", neverBoots: true }, { name: "worker-2" }],
      autoscalerFlags: {
        // Give a switched-on machine 15 s to register.
        "max-node-provision-time": "15s",
        // Retry the group 5 s after the failed scale-up (default 5m).
        "initial-node-group-backoff-duration": "5s",
      },
    });
  });
  after(async () => {
    await site.stop();
  });

  it("cuts the plug of the machine CA gave up on, and scales up with another one", scenario("provisioning timeout", diagnostics, async () => {
    await createPoolPod(site.core, "needs-a-node");
    await eventually("worker-1 switched on", () => {
      assert.equal(site.plug("worker-1").state("Relay"), true);
    }, 30_000);
    await eventually("worker-1's plug cut after CA's provisioning timeout", () => {
      assert.equal(site.plug("worker-1").state("Relay"), false);
    }, 60_000, 250);
    await eventually("the pod Running on worker-2", async () => {
      const pod = await readPod(site.core, "needs-a-node");
      assert.equal(pod.status?.phase, "Running");
      assert.equal(pod.spec?.nodeName, "worker-2");
    }, 60_000, 250);
    // CA 1.36 has two ways to give up, whichever of its loops comes first after the timeout: removing the
    // long-unregistered instance (DeleteNodes of a fake node, no back-off) or reverting the timed-out scale-up
    // (back-off, DecreaseTargetSize). Either way plugpool cuts the plug and quarantines the machine.
    const removed = site.caLog(/Removing 1 unregistered nodes for node group workers/).length > 0;
    const reverted = site.caLog(/Reverting timed-out scale-up for node group workers/).length > 0;
    assert.ok(removed || reverted, "CA gave the machine up");
    console.log(`provisioning timeout: CA gave worker-1 up by ${removed ? "DeleteNodes (unregistered node removal)" : "DecreaseTargetSize (scale-up timeout)"}`);
    assert.deepEqual(site.plugpool.events("plug-off").map((e) => [e.machine, e.reason]), [["worker-1", "unregistered"]]);
    assert.deepEqual(site.plugpool.events("quarantined").map((e) => e.machine), ["worker-1"]);
    assert.deepEqual(site.plugpool.events("powered-on").map((e) => e.machine), ["worker-1", "worker-2"]);
    assert.deepEqual(site.history("worker-1"), ["booting", "off"]);
    assert.equal(site.plug("worker-1").state("Relay"), false);
    assert.equal(site.caLog(/Scale-up: setting group workers size to 1/).length, 2);
  }));
});
