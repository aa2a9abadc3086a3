// The real cluster-autoscaler in two leader-elected replicas, as the Helm values run it: each pod is a CA (with
// --leader-elect, under the pod's hostname, which names it in CA's Lease) and a `plugpool serve` process beside it
// that contends for plugpool's Lease only while that CA holds CA's Lease. On one machine each pod gets a UTS
// namespace of its own (unshare --uts), so the two CAs have two hostnames. Shown: scale-up and scale-down through
// the pair that leads while the other answers Unavailable naming it; a takeover once the leading pod dies
// (SIGKILL of both); and a takeover while a power-off is in flight, its OS already shut down: the CA that takes
// over removes every ToBeDeletedByClusterAutoscaler taint in its first loop, so the power-off is called off and
// plugpool power-cycles the halted machine, which boots and is Ready again.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { CoordinationV1Api, PatchStrategy, setHeaderOptions, type CoreV1Api } from "@kubernetes/client-node";
import { startAutoscaler, type KillableAutoscaler } from "../harness/autoscaler/process.ts";
import { autoscalerMissing } from "../harness/autoscaler/autoscaler.ts";
import { createOwnedTempDir } from "../harness/control-plane/process.ts";
import { eventually } from "../harness/eventually.ts";
import { startMachineSimulator, type MachineSimulator, type MachineState } from "../harness/machine-simulator.ts";
import type { EmulatedPlug } from "../harness/plug-emulator/index.ts";
import {
  assertBuilt, NAMESPACE, plugpoolConfig, POOL_LABEL, PREFIX, startCluster, startDevices, startPlugpoolProcess, type Devices, type MachineSpec, type PlugpoolProcess,
} from "../harness/site/index.ts";
import { deleteAllPods, deletePod, nodeNames, readPod, runPoolPod, scenario } from "./autoscaler/scenario.ts";

const TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler";
/** Keeps CA from scaling the node down again once it is back, so that its end state can be looked at. */
const SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled";
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
/** cluster-autoscaler's default Lease (--leader-elect-resource-name), in its --namespace. */
const CA_LEASE = "cluster-autoscaler";
/**
 * CA's and plugpool's lease duration (client-go's default, both keep it), with retry periods (CA's jittered up to
 * 2.2 times) and room for a loaded machine on top.
 */
const TAKEOVER_MS = 15_000 + 3 * 2_000 + 25_000;
/**
 * CA's loop interval (its default). A CA that takes over removes the ToBeDeleted taints only in its first loop, one
 * scan interval after it won the Lease, and only of the Nodes its plugpool then places in a group: a plugpool not
 * acting yet answers Unavailable, and CA skips the cleanup for good (cleanUpIfRequired in
 * https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/core/static_autoscaler.go).
 * Its plugpool starts acting within a retry period or two (2 s each) of CA winning the Lease; 10 s leaves room for
 * that under load, where the end-to-end suite's 2 s would race it.
 */
const SCAN_INTERVAL = "10s";
/**
 * plugpool's powerOff.grace: without a power sensor the cut waits this long after the Node went NotReady. Longer
 * than a takeover and the new CA's first loop, so that the cleanup lands before the cut is due.
 */
const GRACE_MS = 50_000;

/** One pod of the two replicas: CA and plugpool, under the pod's hostname. */
interface Pod {
  readonly name: string;
  readonly plugpool: PlugpoolProcess;
  readonly ca: KillableAutoscaler;
}

// Skipped, with the reason, where cluster-autoscaler cannot be built (tests/harness/autoscaler/build.sh).
describe("cluster-autoscaler in two leader-elected replicas, each with its plugpool", { skip: autoscalerMissing() }, () => {
  let core: CoreV1Api;
  let leases: CoordinationV1Api;
  let machines: MachineSimulator;
  let devices: Devices;
  const histories = new Map<string, MachineState[]>();
  /** The control plane's and the plugs' stops, in the order they started. */
  const cleanups: (() => Promise<void> | void)[] = [];
  let dir: string;
  let configPath: string;
  let kubeconfigPath: string;
  const pods: Pod[] = [];

  const plug = (machine: string): EmulatedPlug => devices.plug(machine);
  /** The switch commands that reached a machine's plug, in order. */
  const switches = (machine: string): ("on" | "off")[] =>
    plug(machine).calls.flatMap((c) => {
      const match = /^\/switch\/[^/?]+\/turn_(on|off)(\?|$)/.exec(c.path);
      return match?.[1] === "on" || match?.[1] === "off" ? [match[1]] : [];
    });
  const diagnostics = (): string =>
    pods.map((p) => [
      `--- ${p.name}: cluster-autoscaler (${p.ca.logPath}) ---`, p.ca.logTail(40),
      `--- ${p.name}: plugpool ---`, p.plugpool.tail(30),
    ].join("\n")).join("\n") + `\n--- simulator failures ---\n${machines.failures().map(String).join("\n") || "(none)"}`;

  /** Starts a pod: plugpool first (a native sidecar starts before the main container), then CA talking to it. */
  const startPod = async (name: string): Promise<Pod> => {
    const plugpool = await startPlugpoolProcess({ name, configPath, kubeconfigPath, hostname: name, env: { POD_NAMESPACE: NAMESPACE } });
    try {
      const ca = await startAutoscaler({
        kubeconfigPath,
        grpcAddress: String(plugpool.logged("serving")[0]?.grpc),
        hostname: name,
        flags: { "leader-elect": "true", "scan-interval": SCAN_INTERVAL },
      });
      const pod = { name, plugpool, ca };
      pods.push(pod);
      return pod;
    } catch (error) {
      await plugpool.close();
      throw error;
    }
  };
  /** The pod's node dies: both containers at once, neither gives its Lease up. */
  const killPod = async (pod: Pod): Promise<void> => {
    await Promise.all([pod.ca.kill(), pod.plugpool.kill()]);
  };
  const caLeader = async (): Promise<string | undefined> => {
    try {
      return (await leases.readNamespacedLease({ namespace: NAMESPACE, name: CA_LEASE })).spec?.holderIdentity;
    } catch {
      return undefined;
    }
  };
  const acting = (pod: Pod): Record<string, unknown>[] => pod.plugpool.logged("acting: this plugpool holds its Lease");
  /** Waits until `pod`'s CA holds CA's Lease and its plugpool acts. */
  const leads = async (pod: Pod, timeoutMs: number): Promise<void> => {
    await eventually(`${pod.name} leading`, async () => {
      assert.equal(await caLeader(), pod.name, "CA's Lease holder");
      assert.equal(acting(pod).length, 1, `${pod.name}'s plugpool acting`);
    }, timeoutMs, 250);
  };
  /**
   * The passive pod's plugpool refuses CA's calls, naming the acting one's pod: from its first answer on, since it
   * serves only once its first look at the Leases is done.
   */
  const refusesNaming = async (passive: Pod, active: Pod): Promise<void> => {
    const refused = await passive.plugpool.client.call("nodeGroups", {});
    assert.equal(refused.error?.code, status.UNAVAILABLE);
    assert.match(refused.error.details, new RegExp(`the acting plugpool is ${active.name}_`));
  };
  const caLog = (pod: Pod, pattern: RegExp): string[] => pod.ca.log().split("\n").filter((l) => pattern.test(l));

  before(async () => {
    assertBuilt();
    dir = createOwnedTempDir("plugpool-ca-leader-");
    const cluster = await startCluster();
    cleanups.push(() => cluster.plane.stop());
    core = cluster.core;
    leases = cluster.admin.makeApiClient(CoordinationV1Api);
    kubeconfigPath = cluster.kubeconfigPath;
    // worker-1 has a power sensor: its grace ends once it draws standby, so its power-offs take seconds. worker-2
    // has none and waits the whole grace: the power-off that is in flight at the second takeover.
    const specs: MachineSpec[] = [{ name: "worker-1", powerSensor: true }, { name: "worker-2" }];
    devices = await startDevices(specs, dir, cleanups);
    for (const m of specs) histories.set(m.name, []);
    configPath = join(dir, "config.yaml");
    writeFileSync(configPath, plugpoolConfig({
      groups: [{ id: "workers", labels: POOL_LABEL, nodes: specs.map((m) => devices.configNode(m)) }],
      deviceTimeout: "1s",
      sections: {
        powerOff: { namespace: NAMESPACE, notReadyTimeout: "20s", grace: `${GRACE_MS / 1000}s`, standbyWatts: 5, standbyWindow: "500ms" },
      },
    }));
    machines = startMachineSimulator({
      kubeConfig: cluster.admin,
      providerIDPrefix: PREFIX,
      machines: specs.map((m) => ({ name: m.name, ...devices.powerSource(m) })),
      capacity: { cpu: "4", memory: "8Gi", pods: "110" },
      labels: POOL_LABEL,
      bootDelayMs: 1000,
      shutdownDelayMs: 500,
      heartbeatMs: 1000,
      onChange: (machine, state) => histories.get(machine)?.push(state),
    });
  });

  after(async () => {
    // CAs first: each sends its plugpool Cleanup on the way out.
    await Promise.all(pods.map((p) => p.ca.stop()));
    await Promise.all(pods.map((p) => p.plugpool.close()));
    await machines.stop();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it("scales up and down through the pair that leads; the other pair's plugpool answers Unavailable naming it", scenario("scale through the leader", diagnostics, async () => {
    const a = await startPod("pod-a");
    await leads(a, TAKEOVER_MS);
    const b = await startPod("pod-b");
    await refusesNaming(b, a);

    const node = await runPoolPod(core, "first");
    assert.equal(node, "worker-1");
    assert.equal(caLog(a, /Scale-up: setting group workers size to 1/).length, 1);
    await deleteAllPods(core);
    await eventually("worker-1 powered off and its Node deleted", async () => {
      assert.equal(plug("worker-1").state("Relay"), false);
      assert.deepEqual(await nodeNames(core), []);
    }, 90_000, 250);
    assert.equal(caLog(a, /Scale-down: removing empty node "worker-1"/).length, 1);
    assert.deepEqual(histories.get("worker-1"), ["booting", "running", "shutting-down", "halted", "off"]);
    assert.deepEqual(caLog(b, /Scale-up|Scale-down|Autoscaler loop triggered/), [], "pod-b's CA never ran a loop");
    assert.deepEqual(acting(b), [], "pod-b's plugpool never acted");
  }));

  it("hands over to the other pair when the leading pod dies, which then scales up", scenario("takeover after SIGKILL", diagnostics, async () => {
    const [a, b] = pods as [Pod, Pod];
    const killedAt = performance.now();
    await killPod(a);
    await leads(b, TAKEOVER_MS);
    console.log(`pod-b leads ${((performance.now() - killedAt) / 1000).toFixed(1)} s after pod-a died`);
    // Its replacement, as a Deployment starts one, waits beside it.
    const c = await startPod("pod-c");
    await refusesNaming(c, b);

    assert.equal(await runPoolPod(core, "after-takeover"), "worker-1");
    assert.equal(caLog(b, /Scale-up: setting group workers size to 1/).length, 1);
  }));

  it("calls a power-off in flight off when the CA taking over removes its taint, and brings the halted machine back", scenario("takeover mid power-off", diagnostics, async () => {
    const [, b, c] = pods as [Pod, Pod, Pod];
    // worker-1 runs a pod and stays; a pod that does not fit beside it brings worker-2 up.
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "big", labels: { app: "e2e" } },
        spec: {
          nodeSelector: { ...POOL_LABEL },
          terminationGracePeriodSeconds: 0,
          containers: [{ name: "app", image: "registry.k8s.io/pause:3.10", resources: { requests: { cpu: "3500m", memory: "1Gi" } } }],
        },
      },
    });
    await eventually("pod big Running on worker-2", async () => {
      const pod = await readPod(core, "big");
      assert.deepEqual([pod.status?.phase, pod.spec?.nodeName], ["Running", "worker-2"]);
    }, 60_000, 250);
    const uid = (await core.readNode({ name: "worker-2" })).metadata?.uid;

    // CA scales worker-2 down; the pod-b pair dies once its OS is shut down, in the power-off's grace.
    await deletePod(core, "big");
    await eventually("worker-2 halted and its Node NotReady, in the grace", async () => {
      assert.equal(machines.state("worker-2"), "halted");
      const node = await core.readNode({ name: "worker-2" });
      assert.equal(node.status?.conditions?.find((k) => k.type === "Ready")?.status, "False");
      assert.ok(node.spec?.taints?.some((t) => t.key === TO_BE_DELETED), "CA's taint on it");
    }, 60_000, 250);
    assert.equal(caLog(b, /Scale-down: removing empty node "worker-2"/).length, 1);
    await killPod(b);
    const killedAt = performance.now();
    const historyAtKill = histories.get("worker-2")?.length ?? 0;
    const switchesAtKill = switches("worker-2").length;
    await leads(c, TAKEOVER_MS);
    console.log(`pod-c leads ${((performance.now() - killedAt) / 1000).toFixed(1)} s after pod-b died`);

    // pod-c's plugpool resumed the power-off and acted before its CA's first loop, which therefore removed the taint.
    const resumed = c.plugpool.lines.filter((l) => l.event === "power-off-started" && l.machine === "worker-2");
    assert.deepEqual(resumed.map((l) => l.resumed), [true], "pod-c's plugpool resumed the power-off");
    const firstLoop = await firstLoopAt(c);
    assert.ok(Date.parse(String(acting(c)[0]?.timestamp)) < firstLoop, "pod-c's plugpool acted before its CA's first loop");
    await eventually("CA's taint removed by pod-c's CA", async () => {
      const { items } = await core.listNamespacedEvent({ namespace: "default", fieldSelector: "reason=ClusterAutoscalerCleanup,involvedObject.name=worker-2" });
      assert.ok(items.some((e) => e.message === `removed ${TO_BE_DELETED} taint from node worker-2`), items.map((e) => e.message).join("; "));
    }, 30_000, 250);
    // Back and empty, the node would be scaled down anew; an operator looking into the takeover keeps it, as here.
    await core.patchNode({ name: "worker-2", body: { metadata: { annotations: { [SCALE_DOWN_DISABLED]: "true" } } } }, MERGE);

    // Without the taint the power-off is given up at its next pass; once the grace since NotReady has passed, the
    // halted machine is power-cycled.
    await eventually("worker-2 power-cycled, booted and its Node Ready again", async () => {
      assert.equal(machines.state("worker-2"), "running");
      const node = await core.readNode({ name: "worker-2" });
      assert.equal(node.status?.conditions?.find((k) => k.type === "Ready")?.status, "True");
      assert.equal(node.metadata?.uid, uid, "the same Node");
      assert.deepEqual(node.spec?.taints?.filter((t) => t.key === TO_BE_DELETED) ?? [], [], "no ToBeDeleted taint");
    }, GRACE_MS + 30_000, 250);
    assert.equal(plug("worker-2").state("Relay"), true);
    assert.deepEqual(switches("worker-2").slice(switchesAtKill), ["off", "on"], "one power cycle at worker-2's plug since pod-b died");
    assert.deepEqual(histories.get("worker-2")?.slice(historyAtKill), ["off", "booting", "running"], "worker-2 since pod-b died");
    const refused = c.plugpool.lines.filter((l) => l.event === "refused" && l.machine === "worker-2");
    assert.deepEqual(refused.map((l) => l.rule), ["registered-without-taint"], "the power-off given up for want of CA's taint");
    assert.equal(c.plugpool.lines.filter((l) => l.event === "revived" && l.machine === "worker-2").length, 1);
    assert.equal(switches("worker-1").filter((s) => s === "off").length, 1, "worker-1 was switched off once, in the first scenario");
    assert.equal(machines.state("worker-1"), "running");
  }));
});

/** When CA's first loop began (epoch ms): klog's `I1205 08:24:27.803198 …] Autoscaler loop triggered …`, local time. */
async function firstLoopAt(pod: Pod): Promise<number> {
  let at = Number.NaN;
  await eventually(`${pod.name}'s CA's first loop`, () => {
    const line = pod.ca.log().split("\n").find((l) => l.includes("Autoscaler loop triggered"));
    const match = /^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3})/.exec(line ?? "");
    assert.ok(match, "no loop yet");
    const [month, day, hours, minutes, seconds, ms] = match.slice(1).map(Number) as [number, number, number, number, number, number];
    at = new Date(new Date().getFullYear(), month - 1, day, hours, minutes, seconds, ms).getTime();
  }, 30_000, 250);
  return at;
}
