// Charts select on kubernetes.io/arch and kubernetes.io/os: a pod that does must scale a group up from zero with
// the real cluster-autoscaler, which plans on plugpool's template alone while the group has no node. A pod
// selecting an architecture the group does not have must not.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { CoreV1Api } from "@kubernetes/client-node";
import { eventually } from "../../harness/eventually.ts";
import { startSite, type Site } from "../../harness/site/index.ts";
import { nodeNames, readPod, scenario } from "./scenario.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";

async function createArchPod(core: CoreV1Api, name: string, arch: string): Promise<void> {
  await core.createNamespacedPod({
    namespace: "default",
    body: {
      metadata: { name, labels: { app: "e2e" } },
      spec: {
        nodeSelector: { "kubernetes.io/arch": arch, "kubernetes.io/os": "linux" },
        terminationGracePeriodSeconds: 0,
        containers: [{ name: "app", image: "registry.k8s.io/pause:3.10", resources: { requests: { cpu: "1", memory: "1Gi" } } }],
      },
    },
  });
}

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: pods that select kubernetes.io/arch", { skip: autoscalerMissing() }, () => {
  let site: Site;
  const diagnostics = (): string => site.diagnostics();

  before(async () => {
    site = await startSite({ machines: [{ name: "worker-1" }, { name: "worker-2" }] });
  });
  after(async () => {
    await site.stop();
  });

  it("scales the group up from zero for a pod with nodeSelector kubernetes.io/arch: amd64, never for arm64", scenario("arch selector", diagnostics, async () => {
    assert.deepEqual(await nodeNames(site.core), []);
    await createArchPod(site.core, "on-arm", "arm64");
    await eventually("CA says the arm64 pod cannot trigger a scale-up", async () => {
      const { items } = await site.core.listNamespacedEvent({ namespace: "default", fieldSelector: "involvedObject.name=on-arm,reason=NotTriggerScaleUp" });
      assert.match(items[0]?.message ?? "", /didn't match Pod's node affinity\/selector/);
    }, 60_000, 250);
    assert.deepEqual(site.plugpool.events("powered-on"), [], "no machine powered on for a pod none of them can run");

    await createArchPod(site.core, "on-amd", "amd64");
    await eventually("the amd64 pod Running on worker-1", async () => {
      const pod = await readPod(site.core, "on-amd");
      assert.equal(pod.status?.phase, "Running");
      assert.equal(pod.spec?.nodeName, "worker-1");
    }, 60_000, 250);
    assert.equal(site.caLog(/Scale-up: setting group workers size to 1/).length, 1);
    assert.deepEqual(site.plugpool.events("powered-on").map((e) => e.machine), ["worker-1"]);
    assert.equal(site.plug("worker-2").state("Relay"), false);
    assert.equal((await readPod(site.core, "on-arm")).status?.phase, "Pending");
  }));
});
