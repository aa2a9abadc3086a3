// What cluster-autoscaler cannot make plugpool do wrong: a dead plug does not stop CA's loop (the next machine
// is used), and a registered node without CA's ToBeDeleted taint keeps its power whatever DeleteNodes or
// DecreaseTargetSize asks, while CA runs beside it.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { status } from "@grpc/grpc-js";
import { eventually } from "../../harness/eventually.ts";
import { NAMESPACE, PREFIX, startSite, type Site } from "../../harness/site/index.ts";
import { deleteAllPods, runPoolPod, scenario } from "./scenario.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: safety", { skip: autoscalerMissing() }, () => {
  let site: Site;
  const diagnostics = (): string => site.diagnostics();
  const loops = (): number => site.caLog(/Autoscaler loop triggered/).length;


  before(async () => {
    site = await startSite({
      machines: [
        { name: "worker-1", version: "2026.7", platform: "esp32" },
        { name: "worker-2", version: "2026.1", platform: "esp32", powerSensor: true },
        { name: "worker-3", version: "2025.12", platform: "esp8266" },
      ],
      // CA marks an empty node as a deletion candidate but never gets to delete it here.
      autoscalerFlags: { "scale-down-unneeded-time": "10m" },
    });
  });
  after(async () => {
    await site.stop();
  });

  it("keeps CA looping and scales up with the next machine while a plug does not answer", scenario("unreachable plug", diagnostics, async () => {
    // Read once (off), then silent: reads time out at plugpool's 1 s plug timeout, and so does the plug-on.
    await eventually("worker-1's plug read", () => {
      assert.ok(site.plug("worker-1").calls.some((c) => c.status === 200));
    });
    await site.plug("worker-1").inject({ kind: "timeout" });
    try {
      const loopsBefore = loops();
      const node = await runPoolPod(site.core, "dead-plug");
      assert.equal(node, "worker-2");
      assert.equal(site.plug("worker-1").state("Relay"), false);
      await eventually("three more CA loops", () => {
        assert.ok(loops() >= loopsBefore + 3, `${loops() - loopsBefore} loops`);
      }, 20_000);
      assert.deepEqual(site.caLog(/Failed to refresh cloud provider config/), [], "Refresh never failed");
      assert.equal(site.caLog(/Scale-up: setting group workers size to/).length, 1, "one IncreaseSize did it");
      assert.ok(site.plugpool.events("plug-read-failed").some((e) => e.machine === "worker-1"));
      // worker-1's last read failed, so IncreaseSize took worker-2 first: a switch-on sent to a plug that does not
      // answer would have an unknown outcome and count as switched on.
      assert.deepEqual(site.plugpool.events("power-on-failed").map((e) => e.machine), []);
      assert.deepEqual(site.plugpool.events("powered-on").map((e) => e.machine), ["worker-2"]);
    } finally {
      await site.plug("worker-1").clearFaults();
    }
  }));

  it("never powers off a registered node without CA's taint, whatever is requested", scenario("untainted node keeps power", diagnostics, async () => {
    const node = await runPoolPod(site.core, "keeps-power");
    await deleteAllPods(site.core);
    // Empty now: CA marks it unneeded with its soft DeletionCandidate taint, which is not permission to delete.
    await eventually(`CA's DeletionCandidate taint on ${node}`, async () => {
      const taints = (await site.core.readNode({ name: node })).spec?.taints ?? [];
      assert.ok(taints.some((t) => t.key === "DeletionCandidateOfClusterAutoscaler"), JSON.stringify(taints));
    }, 30_000, 250);
    const asked = [
      { name: node, providerID: `${PREFIX}${node}` },
      // How CA names an instance it thinks never registered: name = providerID = instance id.
      { name: `${PREFIX}${node}`, providerID: `${PREFIX}${node}` },
    ];
    for (const ref of asked) {
      const { error } = await site.client.call("nodeGroupDeleteNodes", { id: "workers", nodes: [ref] });
      assert.equal(error?.code, status.FAILED_PRECONDITION, `DeleteNodes ${ref.name}: ${error?.message ?? "OK"}`);
    }
    const decrease = await site.client.call("nodeGroupDecreaseTargetSize", { id: "workers", delta: -1 });
    assert.equal(decrease.error?.code, status.INVALID_ARGUMENT, "no unregistered instance to drop");
    const loopsBefore = loops();
    await eventually("five more CA loops", () => {
      assert.ok(loops() >= loopsBefore + 5);
    }, 30_000);
    assert.equal(site.plug(node).state("Relay"), true);
    assert.equal(site.machines.state(node), "running");
    assert.ok((await site.core.readNode({ name: node })).metadata?.name === node);
    assert.deepEqual((await site.core.listNamespacedPod({ namespace: NAMESPACE })).items, []);
    assert.deepEqual(site.plugpool.events("power-off-started"), []);
    assert.deepEqual(site.plugpool.events("plug-off"), []);
    assert.ok(site.autoscaler.running());
  }));
});
