// Two `plugpool serve` processes (the bundle, as the image runs it) against one real kube-apiserver and the same
// plugs: one acts and the other answers cluster-autoscaler Unavailable naming it; SIGKILL of the one acting hands
// over once its Lease expired; one frozen (SIGSTOP) past its Lease in the middle of a power-off starts no act when
// it wakes, and the instance that took over completes that power-off and the next scale-down, each exactly once.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { status } from "@grpc/grpc-js";
import type { CoreV1Api } from "@kubernetes/client-node";
import type { ControlPlane } from "../harness/control-plane/index.ts";
import { startPlugEmulator, type EmulatedPlug } from "../harness/plug-emulator/index.ts";
import { startMachineSimulator, type MachineSimulator } from "../harness/machine-simulator.ts";
import { assertBuilt, plugpoolConfig, PREFIX, startCluster, startPlugpoolProcess, type PlugpoolProcess } from "../harness/site/index.ts";
import { eventually } from "../harness/eventually.ts";

/** client-go's lease duration, which plugpool uses, and a retry period on top. */
const LEASE_MS = 15_000 + 2_000;
const GRACE_S = 12;

const turnOffs = (plug: EmulatedPlug): number => plug.calls.filter((c) => c.method === "POST" && c.path.includes("turn_off")).length;

describe("two plugpool serve processes (real apiserver, emulated plugs, simulated machines)", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  let plugs: EmulatedPlug[];
  let machines: MachineSimulator;
  let dir: string;
  let config: string;
  const running: PlugpoolProcess[] = [];
  /** The instance acting now, and one passive beside it. */
  let active: PlugpoolProcess;
  let passive: PlugpoolProcess;

  const start = async (name: string): Promise<PlugpoolProcess> => {
    const started = await startPlugpoolProcess({ name, configPath: config, kubeconfigPath: plane.kubeconfigPath });
    running.push(started);
    return started;
  };
  const taint = async (node: string): Promise<void> => {
    await core.patchNode(
      { name: node, body: [{ op: "add", path: "/spec/taints", value: [{ key: "ToBeDeletedByClusterAutoscaler", value: "1", effect: "NoSchedule" }] }] },
    );
  };
  /**
   * DeleteNodes of a Node just tainted, asked again while plugpool's view has not seen the taint yet (it refuses then,
   * and cluster-autoscaler asks again in its next loop).
   */
  // Called right after the taint is written, as CA does: plugpool's view may not have shown it yet.
  const deleteTainted = async (client: PlugpoolProcess["client"], node: string): Promise<void> => {
    const answer = await client.call("nodeGroupDeleteNodes", { id: "workers", nodes: [{ name: node, providerID: `${PREFIX}${node}` }] });
    assert.equal(answer.error, undefined, `DeleteNodes of ${node} accepted`);
  };

  before(async () => {
    assertBuilt();
    ({ plane, core } = await startCluster({ controllers: false, setup: "bare" }));
    plugs = await Promise.all([1, 2].map(() => startPlugEmulator({ version: "2026.7", platform: "esp32", switches: [{ name: "Relay" }] })));
    dir = mkdtempSync(join(tmpdir(), "plugpool-leader-"));
    config = join(dir, "config.yaml");
    writeFileSync(config, plugpoolConfig({
      groups: [{ id: "workers", nodes: plugs.map((plug, i) => ({ name: `worker-${i + 1}`, plug: { url: plug.url, switch: "Relay" } })) }],
      deviceTimeout: "1s",
      sections: { powerOff: { notReadyTimeout: "20s", grace: `${GRACE_S}s` } },
    }));
    machines = startMachineSimulator({
      kubeConfig: plane.admin(),
      providerIDPrefix: PREFIX,
      machines: plugs.map((plug, i) => ({ name: `worker-${i + 1}`, plug, switchName: "Relay" })),
      capacity: { cpu: "4", memory: "8Gi", pods: "110" },
      bootDelayMs: 300,
      shutdownDelayMs: 300,
      heartbeatMs: 1000,
    });
  });

  after(async () => {
    await Promise.all(running.map((p) => p.close()));
    await machines.stop();
    await Promise.all(plugs.map((p) => p.close()));
    await plane.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("lets one act; the other answers Unavailable naming it, and switches nothing", async () => {
    active = await start("plugpool-a");
    await eventually("plugpool-a acting", () => {
      assert.equal(active.logged("acting: this plugpool holds its Lease").length, 1);
    });
    passive = await start("plugpool-b");
    const refused = await passive.client.call("nodeGroupIncreaseSize", { id: "workers", delta: 2 });
    assert.equal(refused.error?.code, status.UNAVAILABLE);
    assert.match(refused.error.details, /the acting plugpool is plugpool-a_/);
    assert.ok(plugs.every((p) => !p.state("Relay")), "the passive instance switched nothing on");

    assert.equal((await active.client.call("refresh", {})).error, undefined);
    assert.equal((await active.client.call("nodeGroupIncreaseSize", { id: "workers", delta: 2 })).error, undefined);
    await eventually("both Nodes registered", async () => {
      const nodes = (await core.listNode()).items.map((n) => n.metadata?.name).sort();
      assert.deepEqual(nodes, ["worker-1", "worker-2"]);
    }, 20_000);
    assert.equal(passive.logged("acting: this plugpool holds its Lease").length, 0);
  });

  it("hands over after SIGKILL of the one acting, once its Lease expired", async () => {
    const killedAt = performance.now();
    await active.kill();
    await eventually("plugpool-b acting", () => {
      assert.equal(passive.logged("acting: this plugpool holds its Lease").length, 1);
    }, LEASE_MS + 10_000);
    assert.ok(performance.now() - killedAt > 10_000, "taken over only once the killed one's Lease had run out");
    const answer = await passive.client.call("nodeGroupNodes", { id: "workers" });
    assert.equal(answer.error, undefined);
    assert.equal(answer.response?.instances.length, 2);
    active = passive;
    passive = await start("plugpool-c");
  });

  it("lets one frozen past its Lease mid power-off start no act when it wakes; the survivor completes it once", async () => {
    await taint("worker-1");
    await deleteTainted(active.client, "worker-1");
    await eventually("worker-1 shut down (NotReady), its grace running", async () => {
      const node = await core.readNode({ name: "worker-1" });
      assert.equal(node.status?.conditions?.find((c) => c.type === "Ready")?.status, "False");
    }, 20_000);
    active.child.kill("SIGSTOP");
    const frozenAt = performance.now();
    await eventually("plugpool-c acting", () => {
      assert.equal(passive.logged("acting: this plugpool holds its Lease").length, 1);
    }, LEASE_MS + 10_000);
    // Frozen past the end of its grace too: woken, its runner finds every step due at once.
    await sleep(Math.max(0, GRACE_S * 1000 + 2_000 - (performance.now() - frozenAt)));
    const woken = active.lines.length;
    active.child.kill("SIGCONT");
    await eventually("worker-1's Node deleted by the survivor", async () => {
      const nodes = (await core.listNode()).items.map((n) => n.metadata?.name);
      assert.deepEqual(nodes, ["worker-2"]);
    }, 30_000);
    await sleep(3_000);
    assert.equal(turnOffs(plugs[0] as EmulatedPlug), 1, "worker-1's plug was switched off exactly once");
    assert.equal(active.logged("stopped acting: this plugpool no longer holds its Lease", woken).length, 1);
    assert.equal(active.logged("acting: this plugpool holds its Lease", woken).length, 0);
    const refused = await active.client.call("nodeGroupNodes", { id: "workers" });
    assert.equal(refused.error?.code, status.UNAVAILABLE);
    assert.match(refused.error.details, /the acting plugpool is plugpool-c_/);
  });

  it("completes the next scale-down through the survivor exactly once", async () => {
    const survivor = passive;
    await taint("worker-2");
    await deleteTainted(survivor.client, "worker-2");
    await eventually("worker-2's Node deleted", async () => {
      assert.deepEqual((await core.listNode()).items, []);
    }, 30_000 + GRACE_S * 1000);
    await sleep(2_000);
    assert.equal(turnOffs(plugs[1] as EmulatedPlug), 1);
    assert.equal(plugs[1]?.state("Relay"), false);
    const pods = await core.listNamespacedPod({ namespace: "plugpool" });
    assert.deepEqual(pods.items, [], "every power-off pod removed");
  });

  it("stops acting within the renew deadline while the apiserver is unreachable, and one acts again once it is back", async () => {
    const survivor = passive;
    const before = survivor.lines.length;
    await plane.stopApiServer();
    try {
      await eventually("the survivor stopped acting", () => {
        assert.equal(survivor.logged("stopped acting: this plugpool no longer holds its Lease", before).length, 1,
          survivor.lines.slice(before).map((l) => `${String(l.timestamp)} ${String(l.message)} ${JSON.stringify(l.error ?? "")}`).join("\n"));
      }, 12_000);
      const refused = await survivor.client.call("nodeGroups", {});
      assert.equal(refused.error?.code, status.UNAVAILABLE);
    } finally {
      await plane.startApiServer();
    }
    await eventually("one of the two acting again", async () => {
      const answers = await Promise.all([survivor, active].map((p) => p.client.call("nodeGroups", {})));
      assert.equal(answers.filter((a) => a.error === undefined).length, 1, answers.map((a) => a.error?.details ?? "ok").join("; "));
    }, LEASE_MS + 15_000, 500);
  });
});
