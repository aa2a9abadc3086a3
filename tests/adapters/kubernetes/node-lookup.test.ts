// The Nodes that claim a machine, read from a real kube-apiserver at the moment of asking.
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createKubernetesClusterView, type KubernetesClusterView } from "../../../src/adapters/kubernetes/cluster-view.ts";
import { createKubernetesNodeLookup, type NodeCache } from "../../../src/adapters/kubernetes/node-lookup.ts";
import { isPlugpoolError } from "../../../src/domain/errors.ts";
import type { NodeLookup } from "../../../src/domain/ports.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { TO_BE_DELETED_TAINT } from "../../../src/domain/model.ts";
import { delayingProxy, fastRetry, machine, nodeBody, throughPort } from "./support.ts";

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

describe("createKubernetesNodeLookup()", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  let lookup: NodeLookup;
  const names = async (name: string, providerID: string): Promise<string[]> =>
    (await lookup.nodesClaiming(name, providerID)).map((n) => n.name).sort();

  before(async () => {
    plane = await startControlPlane();
    core = plane.admin().makeApiClient(CoreV1Api);
    lookup = createKubernetesNodeLookup(plane.admin());
    await core.createNode({ body: nodeBody({ name: "bystander", providerID: "k3s://bystander" }) });
  });
  after(async () => {
    await plane.stop();
  });

  it("finds no Node for a machine that has none", async () => {
    assert.deepEqual(await lookup.nodesClaiming("worker-1", "k3s://worker-1"), []);
  });

  it("finds the Node by name and by providerID, as the apiserver has it now", async () => {
    await core.createNode({ body: nodeBody({ name: "worker-1", providerID: "k3s://worker-1", labels: { "example.com/pool": "workers" } }) });
    // Read at once after the write: nothing to wait for, no watch to catch up.
    const [node, ...others] = await lookup.nodesClaiming("worker-1", "k3s://worker-1");
    assert.equal(others.length, 0);
    assert.equal(node?.name, "worker-1");
    assert.equal(node.providerID, "k3s://worker-1");
    assert.equal(node.ready, true);
    assert.deepEqual(node.labels, { "example.com/pool": "workers" });
    await core.createNode({ body: nodeBody({ name: "worker-2.lan", providerID: "k3s://worker-2" }) });
    assert.deepEqual(await names("worker-2", "k3s://worker-2"), ["worker-2.lan"]);
  });

  it("finds every claimant: one by name with a foreign providerID and one by providerID", async () => {
    await core.createNode({ body: nodeBody({ name: "worker-3", providerID: "aws://i-0123" }) });
    await core.createNode({ body: nodeBody({ name: "worker-3.lan", providerID: "k3s://worker-3" }) });
    assert.deepEqual(await names("worker-3", "k3s://worker-3"), ["worker-3", "worker-3.lan"]);
  });

  it("finds two Nodes that carry the same providerID", async () => {
    await core.createNode({ body: nodeBody({ name: "twin-a", providerID: "k3s://worker-4" }) });
    await core.createNode({ body: nodeBody({ name: "twin-b", providerID: "k3s://worker-4" }) });
    assert.deepEqual(await names("worker-4", "k3s://worker-4"), ["twin-a", "twin-b"]);
  });

  it("matches a Node without providerID by name only, and an empty providerID matches nothing", async () => {
    await core.createNode({ body: nodeBody({ name: "worker-5" }) });
    await core.createNode({ body: nodeBody({ name: "unrelated" }) });
    assert.deepEqual(await names("worker-5", ""), ["worker-5"]);
    assert.deepEqual(await names("worker-5", "k3s://worker-5"), ["worker-5"]);
  });

  it("fails as cluster-refused, naming what it read and never the token, when the apiserver says no", async () => {
    const token = "not-a-valid-token-0123456789";
    const stranger = new KubeConfig();
    const admin = plane.admin();
    const cluster = admin.getCurrentCluster();
    assert.ok(cluster !== null);
    stranger.loadFromOptions({
      clusters: [cluster],
      users: [{ name: "stranger", token }],
      contexts: [{ name: "stranger", cluster: cluster.name, user: "stranger" }],
      currentContext: "stranger",
    });
    await assert.rejects(createKubernetesNodeLookup(stranger).nodesClaiming("worker-1", "k3s://worker-1"), (error: unknown) => {
      assert.ok(isPlugpoolError(error));
      assert.equal(error.code, "cluster-refused");
      assert.match(error.message, /reading Node "worker-1" and the Nodes with providerID "k3s:\/\/worker-1" was refused by the apiserver: /);
      assert.doesNotMatch(`${error.message} ${String(error.cause)}`, new RegExp(token));
      return true;
    });
  });

  it("ends when the caller's signal aborts", async () => {
    await assert.rejects(
      lookup.nodesClaiming("worker-1", "k3s://worker-1", { signal: AbortSignal.abort(new Error("deadline")) }),
      (error: unknown) => isPlugpoolError(error) && error.code === "cancelled" && /deadline/.test(error.message),
    );
  });

  describe("with the watch's cache", () => {
    let view: KubernetesClusterView;
    let cached: NodeLookup;
    let fullReads = 0;
    /** Another Node changes every few milliseconds, as on a cluster with many: the watch keeps hearing. */
    const busy = async (work: () => Promise<void>): Promise<void> => {
      const beating = new AbortController();
      const changes = (async () => {
        for (let i = 0; !beating.signal.aborted; i++) {
          await core.patchNode({ name: "bystander", body: { metadata: { labels: { beat: String(i) } } } }, mergePatch);
          await sleep(10);
        }
      })();
      try {
        await work();
      } finally {
        beating.abort();
        await changes;
      }
    };
    const cachedNames = async (name: string, providerID: string): Promise<string[]> =>
      (await cached.nodesClaiming(name, providerID)).map((n) => n.name).sort();

    let proxy: { port: number; stop: () => Promise<void> };

    before(async () => {
      // The watch hears of every change a good while after the apiserver made it: a lookup that did not wait for
      // it to catch up would miss what changed just before.
      const server = new URL(plane.admin().getCurrentCluster()?.server ?? "");
      proxy = await delayingProxy({ host: server.hostname, port: Number(server.port) }, 300);
      const late = throughPort(plane.admin(), proxy.port);
      view = createKubernetesClusterView(late, { powerOffNamespace: "plugpool", machines: [machine("worker-9")], retry: fastRetry });
      view.start();
      await view.whenSynced(AbortSignal.timeout(20_000));
      cached = createKubernetesNodeLookup(plane.admin(), { cache: view.nodeCache, catchUpMs: 2_000, onFullRead: () => { fullReads += 1; } });
    });
    after(async () => {
      await view.stop();
      await proxy.stop();
    });

    it("sees a Node created with the machine's providerID under another name just before, answering from the watch", async () => {
      await busy(async () => {
        await core.createNode({ body: nodeBody({ name: "worker-9.lan", providerID: "k3s://worker-9" }) });
        assert.deepEqual(await cachedNames("worker-9", "k3s://worker-9"), ["worker-9.lan"]);
        await core.createNode({ body: nodeBody({ name: "worker-9", providerID: "k3s://worker-9" }) });
        assert.deepEqual(await cachedNames("worker-9", "k3s://worker-9"), ["worker-9", "worker-9.lan"]);
      });
      assert.equal(fullReads, 0, "no Node but the one named after the machine was read");
    });

    it("sees the taint removed from a Node of another name just before", async () => {
      const drained = { key: TO_BE_DELETED_TAINT, value: "1", effect: "NoSchedule" as const };
      await core.createNode({ body: nodeBody({ name: "worker-8.lan", providerID: "k3s://worker-8", taints: [drained] }) });
      await busy(async () => {
        const tainted = (await cached.nodesClaiming("worker-8", "k3s://worker-8"))[0];
        assert.ok(tainted?.taints.some((t) => t.key === TO_BE_DELETED_TAINT));
        await core.patchNode({ name: "worker-8.lan", body: { spec: { taints: [] } } }, mergePatch);
        const untainted = (await cached.nodesClaiming("worker-8", "k3s://worker-8"))[0];
        assert.equal(untainted?.taints.some((t) => t.key === TO_BE_DELETED_TAINT), false);
      });
      assert.equal(fullReads, 0);
    });

    it("reads every Node, page by page, when the watch cannot tell it has caught up", async () => {
      const behind: NodeCache = { nodes: () => view.nodeCache.nodes(), caughtUp: () => Promise.resolve(false) };
      let reads = 0;
      const uncached = createKubernetesNodeLookup(plane.admin(), { cache: behind, onFullRead: () => { reads += 1; } });
      await core.createNode({ body: nodeBody({ name: "worker-7.lan", providerID: "k3s://worker-7" }) });
      assert.deepEqual((await uncached.nodesClaiming("worker-7", "k3s://worker-7")).map((n) => n.name), ["worker-7.lan"]);
      assert.equal(reads, 1);
    });

    it("tells the cache caught up only with a version it has reached, and stops waiting when told", async () => {
      const cache = view.nodeCache;
      assert.equal(await cache.caughtUp("1", AbortSignal.timeout(5_000)), true);
      assert.equal(await cache.caughtUp("99999999999", AbortSignal.timeout(200)), false);
      assert.equal(await cache.caughtUp("not-a-version", AbortSignal.timeout(5_000)), false, "at once: nothing to compare");
      assert.equal(await cache.caughtUp("99999999999", AbortSignal.abort()), false);
    });

    it("waits for the view to show a taint written just before, when asked to catch up", async () => {
      await core.createNode({ body: nodeBody({ name: "worker-15", providerID: "k3s://worker-15" }) });
      const drained = { key: TO_BE_DELETED_TAINT, value: "1", effect: "NoSchedule" as const };
      const tainted = (): boolean => view.nodeNamed("worker-15")?.taints.some((t) => t.key === TO_BE_DELETED_TAINT) === true;
      await busy(async () => {
        await core.patchNode({ name: "worker-15", body: { spec: { taints: [drained] } } }, mergePatch);
        assert.equal(tainted(), false, "the watch hears of it 300 ms later");
        await cached.viewCaughtUp();
        assert.equal(tainted(), true);
      });
    });

    it("gives the wait up without an error: at the caller's signal, or with no watch to wait for", async () => {
      await cached.viewCaughtUp({ signal: AbortSignal.abort() });
      await lookup.viewCaughtUp();
    });

    it("is right on a quiet cluster too, whichever way it answers", async () => {
      await core.createNode({ body: nodeBody({ name: "worker-6.lan", providerID: "k3s://worker-6" }) });
      assert.deepEqual(await cachedNames("worker-6", "k3s://worker-6"), ["worker-6.lan"]);
    });
  });
});
