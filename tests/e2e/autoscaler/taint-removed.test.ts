// CA's ToBeDeleted taint is plugpool's only licence to shut a registered node down. An operator who removes it
// by hand while the power-off runs takes that licence back: no power-off pod is created after the removal and the
// plug is never switched off, even when the OS had already been shut down.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { ApiException, PatchStrategy, setHeaderOptions, Watch, type V1Node, type V1Pod } from "@kubernetes/client-node";
import { eventually } from "../../support/eventually.ts";
import { autoscalerMissing } from "../../support/autoscaler/autoscaler.ts";
import { NAMESPACE, startEnvironment, type Environment } from "./environment.ts";
import type { LogLine } from "./plugpool-log.ts";
import { deleteAllPods, runPoolPod, scenario, turnOffRequests, warningsAbout } from "./scenario.ts";

const TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler";
const POWER_OFF_MARK = "plugpool.io/power-off-started-at";
/** Keeps CA from starting another scale-down of the node, as an operator who wants it kept would do. */
const SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled";
/** plugpool's powerOff.notReadyTimeout and grace in the environment, and some room for the steps after. */
const POWER_OFF_BOUND_MS = 20_000 + 1_000 + 10_000;
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** A pod as first seen in its namespace; `createdAt` is the resourceVersion of its creation. */
interface SeenPod {
  readonly name: string;
  readonly node: string;
  readonly createdAt: number;
}

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/support/autoscaler/build.sh).
describe("cluster-autoscaler with plugpool: CA's taint removed during a power-off", { skip: autoscalerMissing() }, () => {
  let env: Environment;
  let onLog: (line: LogLine) => void = () => undefined;
  const watches: { abort(): void }[] = [];
  const diagnostics = (): string => env.diagnostics();

  before(async () => {
    env = await startEnvironment({
      machines: [{ name: "worker-1" }, { name: "worker-2" }],
      onPlugpoolLog: (line) => { onLog(line); },
    });
  });
  after(async () => {
    for (const w of watches) w.abort();
    await env.stop();
  });

  /** Every pod created in plugpool's namespace from now on (nothing but power-off pods lives there). */
  async function watchPods(): Promise<SeenPod[]> {
    const seen: SeenPod[] = [];
    const uids = new Set<string>();
    const watch = new Watch(env.plane.admin());
    watches.push(await watch.watch(`/api/v1/namespaces/${NAMESPACE}/pods`, {}, (phase: string, pod: V1Pod) => {
      const uid = pod.metadata?.uid ?? "";
      if (phase !== "ADDED" || uids.has(uid)) return;
      uids.add(uid);
      seen.push({ name: pod.metadata?.name ?? "", node: pod.spec?.nodeName ?? "", createdAt: Number(pod.metadata?.resourceVersion) });
    }, () => undefined));
    return seen;
  }

  /** Calls `onMark` each time the Node is seen carrying plugpool's power-off mark. */
  async function watchPowerOffMark(node: string, onMark: () => void): Promise<void> {
    const watch = new Watch(env.plane.admin());
    watches.push(await watch.watch("/api/v1/nodes", { fieldSelector: `metadata.name=${node}` }, (_phase: string, object: V1Node) => {
      if (object.metadata?.annotations?.[POWER_OFF_MARK] !== undefined) onMark();
    }, () => undefined));
  }

  /**
   * What an operator does with kubectl: the taint off and scale-down disabled, on the Node as last read (retried
   * on a conflict). Resolves with the resourceVersion the change was stored at.
   */
  async function removeTaintByHand(node: string): Promise<number> {
    for (;;) {
      const current = await env.core.readNode({ name: node });
      const taints = current.spec?.taints ?? [];
      assert.ok(taints.some((t) => t.key === TO_BE_DELETED), `CA's taint on ${node} when DeleteNodes was accepted`);
      // A merge patch replaces the taint list whole; the resourceVersion in it makes it fail on a conflict.
      const body = {
        metadata: { resourceVersion: current.metadata?.resourceVersion, annotations: { [SCALE_DOWN_DISABLED]: "true" } },
        spec: { taints: taints.filter((t) => t.key !== TO_BE_DELETED) },
      };
      try {
        const stored = await env.core.patchNode({ name: node, body }, MERGE);
        return Number(stored.metadata?.resourceVersion);
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 409)) throw error;
      }
    }
  }

  it("creates no power-off pod after the taint is gone and never switches the plug off", scenario("taint removed mid power-off", diagnostics, async () => {
    const node = await runPoolPod(env.core, "taint-removed");
    const pods = await watchPods();
    let removal: Promise<number> | undefined;
    const remove = (): void => {
      removal ??= removeTaintByHand(node);
      removal.catch(() => undefined); // awaited below
    };
    // Whichever comes first after DeleteNodes: plugpool's log line, or its mark on the Node.
    onLog = (line) => {
      if (line.fields.event === "power-off-started" && line.fields.machine === node) remove();
    };
    await watchPowerOffMark(node, remove);

    await deleteAllPods(env.core);
    await eventually(`CA's DeleteNodes of ${node}, and the taint removed by hand`, () => {
      assert.ok(removal !== undefined);
    }, 90_000, 50);
    const removedAt = await (removal ?? Promise.reject(new Error("no removal")));
    const removedTime = performance.now();

    await eventually("plugpool gave the power-off up: its mark cleared", async () => {
      const annotations = (await env.core.readNode({ name: node })).metadata?.annotations ?? {};
      assert.equal(annotations[POWER_OFF_MARK], undefined);
    }, POWER_OFF_BOUND_MS, 250);
    const refused = [
      ...await warningsAbout(env.core, "PowerOffRefused", node),
      ...await warningsAbout(env.core, "PowerOffAborted", node),
    ];
    assert.notDeepEqual(refused, [], "a PowerOffRefused or PowerOffAborted Warning on the Node");
    // Past every bound of the power-off it would have been, in case anything of it still runs.
    await sleep(Math.max(0, removedTime + POWER_OFF_BOUND_MS - performance.now()));

    const before = pods.filter((p) => p.createdAt < removedAt);
    const afterRemoval = pods.filter((p) => p.createdAt > removedAt);
    assert.deepEqual(afterRemoval, [], "no power-off pod created after the taint was removed");
    assert.deepEqual(turnOffRequests(env.plug(node)), [], `no switch-off ever reached ${node}'s plug`);
    assert.equal(env.plug(node).state("Relay"), true);
    const taints = (await env.core.readNode({ name: node })).spec?.taints ?? [];
    assert.ok(!taints.some((t) => t.key === TO_BE_DELETED), "nobody put the taint back");
    if (before.length === 0) {
      console.log("taint removed mid power-off: removed before the power-off pod; the machine kept running");
      assert.equal(env.machines.state(node), "running");
    } else {
      // The OS was already shutting down when the taint went: the machine halts, but keeps its power.
      console.log(`taint removed mid power-off: removed after the power-off pod ${before.map((p) => p.name).join(", ")}; the power stayed`);
      assert.deepEqual(before.map((p) => p.node), [node]);
      assert.equal(env.machines.state(node), "halted");
    }
  }));
});
