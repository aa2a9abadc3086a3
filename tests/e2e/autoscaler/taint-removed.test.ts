// CA's ToBeDeleted taint is plugpool's only licence to shut a registered node down. An operator who removes it
// by hand while the power-off runs takes that licence back: no power-off pod is created after the removal and the
// plug is never switched off for the power-off. When the OS had already been shut down, the machine is brought
// back: its plug power-cycled, off and at once on again, and it boots.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { ApiException, PatchStrategy, setHeaderOptions, Watch, type V1Node, type V1Pod } from "@kubernetes/client-node";
import { eventually } from "../../harness/eventually.ts";
import { autoscalerMissing } from "../../harness/autoscaler/autoscaler.ts";
import { GRACE_MS, NAMESPACE, NOT_READY_TIMEOUT_MS, startSite, type LogLine, type Site } from "../../harness/site/index.ts";
import { deleteAllPods, runPoolPod, scenario, turnOffRequests, warningsAbout } from "./scenario.ts";

const TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler";
const POWER_OFF_MARK = "plugpool.io/power-off-started-at";
/** Keeps CA from starting another scale-down of the node, as an operator who wants it kept would do. */
const SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled";
/** plugpool's powerOff.notReadyTimeout and grace on the test site, and some room for the steps after. */
const POWER_OFF_BOUND_MS = NOT_READY_TIMEOUT_MS + GRACE_MS + 10_000;
/**
 * The gap between plugpool's last look at the Node and its request that no check can close: a removal that
 * lands inside it races the request and is not plugpool's to see. Far longer than it takes on loopback.
 */
const RACE_MS = 250;
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** A pod as first seen in its namespace. */
interface SeenPod {
  readonly name: string;
  readonly node: string;
  /** The resourceVersion of its creation (one etcd revision counter orders every write in this cluster). */
  readonly createdAt: number;
  /** performance.now() when the watch told of it, no earlier than its creation. */
  readonly seenAt: number;
}

/** The taint removed by hand: the resourceVersion it was stored at and when the apiserver confirmed it. */
interface Removal {
  readonly storedAt: number;
  readonly time: number;
}

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: CA's taint removed during a power-off", { skip: autoscalerMissing() }, () => {
  let site: Site;
  let onLog: (line: LogLine) => void = () => undefined;
  const watches: { abort(): void }[] = [];
  const diagnostics = (): string => site.diagnostics();

  before(async () => {
    site = await startSite({
      machines: [{ name: "worker-1" }, { name: "worker-2" }],
      onPlugpoolLog: (line) => { onLog(line); },
    });
  });
  after(async () => {
    for (const w of watches) w.abort();
    await site.stop();
  });

  /** Every pod created in plugpool's namespace from now on (nothing but power-off pods lives there). */
  async function watchPods(): Promise<SeenPod[]> {
    const seen: SeenPod[] = [];
    const uids = new Set<string>();
    const watch = new Watch(site.plane.admin());
    watches.push(await watch.watch(`/api/v1/namespaces/${NAMESPACE}/pods`, {}, (phase: string, pod: V1Pod) => {
      const uid = pod.metadata?.uid ?? "";
      if (phase !== "ADDED" || uids.has(uid)) return;
      uids.add(uid);
      seen.push({
        name: pod.metadata?.name ?? "",
        node: pod.spec?.nodeName ?? "",
        createdAt: Number(pod.metadata?.resourceVersion),
        seenAt: performance.now(),
      });
    }, () => undefined));
    return seen;
  }

  /**
   * Resolves once CA's DeleteNodes of `node` has been accepted: plugpool's power-off started (its log line, or its
   * mark on the Node, whichever comes first).
   */
  async function powerOffStarted(node: string): Promise<void> {
    let started = (): void => undefined;
    const seen = new Promise<void>((resolve) => { started = resolve; });
    onLog = (line) => {
      if (line.fields.event === "power-off-started" && line.fields.machine === node) started();
    };
    const watch = new Watch(site.plane.admin());
    watches.push(await watch.watch("/api/v1/nodes", { fieldSelector: `metadata.name=${node}` }, (_phase: string, object: V1Node) => {
      if (object.metadata?.annotations?.[POWER_OFF_MARK] !== undefined) started();
    }, () => undefined));
    await seen;
  }

  /** What an operator does with kubectl: the taint off and scale-down disabled, on the Node as last read. */
  async function removeTaintByHand(node: string): Promise<Removal> {
    for (;;) {
      const current = await site.core.readNode({ name: node });
      const taints = current.spec?.taints ?? [];
      assert.ok(taints.some((t) => t.key === TO_BE_DELETED), `CA's taint on ${node} when DeleteNodes was accepted`);
      // A merge patch replaces the taint list whole; the resourceVersion in it makes it fail on a conflict.
      const body = {
        metadata: { resourceVersion: current.metadata?.resourceVersion, annotations: { [SCALE_DOWN_DISABLED]: "true" } },
        spec: { taints: taints.filter((t) => t.key !== TO_BE_DELETED) },
      };
      try {
        const stored = await site.core.patchNode({ name: node, body }, MERGE);
        return { storedAt: Number(stored.metadata?.resourceVersion), time: performance.now() };
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 409)) throw error;
      }
    }
  }

  /** plugpool gives the power-off up (its mark cleared, a Warning on the Node), and its bounds pass. */
  async function powerOffGivenUp(node: string, removal: Removal): Promise<void> {
    await eventually("plugpool gave the power-off up: its mark cleared", async () => {
      const annotations = (await site.core.readNode({ name: node })).metadata?.annotations ?? {};
      assert.equal(annotations[POWER_OFF_MARK], undefined);
    }, POWER_OFF_BOUND_MS, 250);
    const refused = [
      ...await warningsAbout(site.core, "PowerOffRefused", node),
      ...await warningsAbout(site.core, "PowerOffAborted", node),
    ];
    assert.notDeepEqual(refused, [], "a PowerOffRefused or PowerOffAborted Warning on the Node");
    // Past every bound of the power-off it would have been, in case anything of it still runs.
    await sleep(Math.max(0, removal.time + POWER_OFF_BOUND_MS - performance.now()));
  }

  /** The machine kept its power and its Node, and nobody put the taint back. */
  async function powerKept(node: string): Promise<void> {
    assert.deepEqual(turnOffRequests(site.plug(node)), [], `no switch-off ever reached ${node}'s plug`);
    assert.equal(site.plug(node).state("Relay"), true);
    const taints = (await site.core.readNode({ name: node })).spec?.taints ?? [];
    assert.ok(!taints.some((t) => t.key === TO_BE_DELETED), "nobody put the taint back");
  }

  it("creates no power-off pod after the taint is removed right after DeleteNodes, and never switches the plug off", scenario("taint removed right after DeleteNodes", diagnostics, async () => {
    const node = await runPoolPod(site.core, "taint-removed");
    const pods = await watchPods();
    const started = powerOffStarted(node);
    await deleteAllPods(site.core);
    await started;
    const removal = await removeTaintByHand(node);
    await powerOffGivenUp(node, removal);

    const createdAfter = (p: SeenPod): boolean => p.createdAt > removal.storedAt && p.seenAt > removal.time + RACE_MS;
    const shutDown = pods.filter((p) => !createdAfter(p));
    assert.deepEqual(pods.filter(createdAfter), [], "no power-off pod created after the taint was removed");
    if (shutDown.length === 0) {
      console.log("taint removed right after DeleteNodes: before the power-off pod; the machine kept running");
      await powerKept(node);
      assert.equal(site.machines.state(node), "running");
    } else {
      // The power-off pod came first (or raced the removal): the OS halted, and plugpool brings the machine back by
      // a power cycle, each switch-off followed at once by a switch-on.
      console.log(`taint removed right after DeleteNodes: after the power-off pod ${shutDown.map((p) => p.name).join(", ")}; brought back`);
      assert.deepEqual(shutDown.map((p) => p.node), [node]);
      await eventually(`${node} brought back and running`, () => {
        assert.equal(site.machines.state(node), "running");
      }, POWER_OFF_BOUND_MS, 250);
      const switches = site.plug(node).calls.filter((c) => /^\/switch\/[^/?]+\/turn_(on|off)(\?|$)/.test(c.path)).map((c) => c.path.endsWith("turn_off") ? "off" : "on");
      assert.ok(switches.length > 0 && switches.at(-1) === "on", `the cycle ended on: ${switches.join(", ")}`);
      assert.equal(site.plug(node).state("Relay"), true);
      const taints = (await site.core.readNode({ name: node })).spec?.taints ?? [];
      assert.ok(!taints.some((t) => t.key === TO_BE_DELETED), "nobody put the taint back");
    }
    // Out of the next scenario's way, as an operator looking into it would leave it.
    await site.core.patchNode({ name: node, body: { spec: { unschedulable: true } } }, MERGE);
  }));

  it("creates no power-off pod once the taint is gone while the pod could not be created yet", scenario("taint removed while the power-off pod is held back", diagnostics, async () => {
    // No pod can be created in plugpool's namespace while this quota exists: plugpool's power-off is held at
    // its pod until the quota goes, and the taint is removed meanwhile. Only a check made after the removal
    // keeps the pod from being created once the quota is gone.
    const quota = "hold-power-off-pods";
    await site.core.createNamespacedResourceQuota({ namespace: NAMESPACE, body: { metadata: { name: quota }, spec: { hard: { pods: "0" } } } });
    const node = await runPoolPod(site.core, "taint-removed-held");
    const pods = await watchPods();
    const started = powerOffStarted(node);
    await deleteAllPods(site.core);
    await started;
    // Long enough for plugpool to try the pod and be refused.
    await sleep(2000);
    const removal = await removeTaintByHand(node);
    await site.core.deleteNamespacedResourceQuota({ namespace: NAMESPACE, name: quota });
    await powerOffGivenUp(node, removal);

    assert.deepEqual(pods, [], "no power-off pod was ever created");
    await powerKept(node);
    assert.equal(site.machines.state(node), "running");
  }));
});
