// plugpool's leader election against a real kube-apiserver: of two electors one acts; one that can no longer
// reach the apiserver stops acting before its Lease can pass to the other; a clean stop hands the Lease over at
// once; and where cluster-autoscaler runs leader-elected, the elector beside the leading CA is the one that acts,
// while the one beside a CA that does not lead still names it and sees its Lease lapse.
import assert from "node:assert/strict";
import { createServer, connect, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { CoordinationV1Api, CoreV1Api, KubeConfig, V1MicroTime } from "@kubernetes/client-node";
import { createLeaderLease, type LeaderLease, type LeaderLeaseOptions, type LeaseTiming } from "../../../src/adapters/kubernetes/leader-lease.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { createNamespace, eventually } from "./support.ts";

const namespace = "plugpool";
const timing: LeaseTiming = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 200 };

/** A TCP relay to the apiserver that can be cut: every connection is dropped and new ones hang (a partition). */
interface Relay {
  readonly url: string;
  cut(): void;
  /** New connections go through again. */
  heal(): void;
  close(): Promise<void>;
}

async function startRelay(target: URL): Promise<Relay> {
  const sockets = new Set<Socket>();
  let cut = false;
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => undefined);
    if (cut) return;
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    upstream.on("error", () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => {
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return {
    url: `https://127.0.0.1:${port}`,
    cut() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    heal() {
      cut = false;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
    },
  };
}

/** `kc` talking to `server` instead. */
function through(kc: KubeConfig, server: string): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: kc.clusters.map((c) => ({ ...c, server })),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return copy;
}

describe("createLeaderLease()", () => {
  let plane: ControlPlane;
  let leases: CoordinationV1Api;
  const started: LeaderLease[] = [];
  let next = 0;

  /** A started elector on its own Lease name per test; `changes` logs when it started and stopped acting. */
  const elector = (lease: string, name: string, options: Partial<LeaderLeaseOptions> & { kc?: KubeConfig } = {}) => {
    const changes: { acting: boolean; at: number }[] = [];
    const it = createLeaderLease(options.kc ?? plane.admin(), {
      lease: { namespace, name: lease },
      identity: `${name}_${String(next++)}`,
      timing,
      onChange: (acting) => changes.push({ acting, at: performance.now() }),
      ...options,
    });
    started.push(it);
    void it.start();
    return { it, changes, identity: `${name}_${String(next - 1)}` };
  };

  /** Samples both every 10 ms for `ms`: never do both act. */
  const neverBoth = async (a: LeaderLease, b: LeaderLease, ms: number): Promise<void> => {
    const end = performance.now() + ms;
    while (performance.now() < end) {
      assert.ok(!(a.acting() && b.acting()), "two electors acted at once");
      await sleep(10);
    }
  };

  before(async () => {
    plane = await startControlPlane();
    leases = plane.admin().makeApiClient(CoordinationV1Api);
    await createNamespace(plane.admin().makeApiClient(CoreV1Api), namespace);
  });
  after(async () => {
    await Promise.all(started.map((e) => e.stop()));
    await plane.stop();
  });

  it("lets exactly one of two electors act, and the other names it", async () => {
    const a = elector("one-of-two", "pod-a");
    const b = elector("one-of-two", "pod-b");
    await eventually("one acting", () => a.it.acting() || b.it.acting());
    await neverBoth(a.it, b.it, 2 * timing.leaseDurationMs);
    const [actor, other] = a.it.acting() ? [a, b] : [b, a];
    assert.ok(actor.it.acting(), "the first to act keeps acting while it renews");
    assert.equal(other.it.holder(), actor.identity);
    assert.equal(actor.it.holder(), undefined);
    const stored = await leases.readNamespacedLease({ name: "one-of-two", namespace });
    const { holderIdentity, leaseDurationSeconds } = stored.spec ?? {};
    assert.deepEqual({ holderIdentity, leaseDurationSeconds }, { holderIdentity: actor.identity, leaseDurationSeconds: 3 });
  });

  it("stops acting when it cannot renew, before the other takes the Lease, which waits until it expired", async () => {
    const relay = await startRelay(new URL(plane.server));
    try {
      const a = elector("partition", "pod-a", { kc: through(plane.admin(), relay.url) });
      await eventually("pod-a acting", () => a.it.acting());
      const b = elector("partition", "pod-b");
      await neverBoth(a.it, b.it, timing.leaseDurationMs);
      assert.ok(a.it.acting() && !b.it.acting());

      relay.cut();
      const cutAt = performance.now();
      const watching = neverBoth(a.it, b.it, 2 * timing.leaseDurationMs);
      await eventually("pod-b acting", () => b.it.acting(), 4 * timing.leaseDurationMs);
      await watching;
      const stopped = a.changes.find((c) => !c.acting)?.at ?? Number.NaN;
      const took = b.changes.find((c) => c.acting)?.at ?? Number.NaN;
      assert.ok(stopped - cutAt <= timing.renewDeadlineMs + 200, `pod-a acted for ${Math.round(stopped - cutAt)} ms after the cut`);
      // Its last renew went out at most a retry period (and a request) before the cut; the Lease ran from there.
      assert.ok(took - cutAt >= timing.leaseDurationMs - timing.retryPeriodMs - 300, `pod-b took over ${Math.round(took - cutAt)} ms after the cut`);
      assert.ok(stopped < took, "the cut-off elector stopped acting before the other started");
      assert.equal(b.it.term(), 1);
    } finally {
      await relay.close();
    }
  });

  it("starts a new term, told as one, when it renews again after a lapse no other instance used", async () => {
    const relay = await startRelay(new URL(plane.server));
    try {
      const a = elector("lapse", "pod-a", { kc: through(plane.admin(), relay.url) });
      await eventually("pod-a acting", () => a.it.acting());
      relay.cut();
      const cutAt = performance.now();
      await eventually("pod-a told it stopped acting", () => a.changes.length === 2, 2 * timing.renewDeadlineMs);
      assert.ok((a.changes[1]?.at ?? Number.NaN) - cutAt <= timing.renewDeadlineMs + 50, "told when the renew deadline passed");
      relay.heal();
      await eventually("pod-a acting again", () => a.it.acting(), 2 * timing.leaseDurationMs);
      assert.deepEqual(a.changes.map((c) => c.acting), [true, false, true]);
      assert.equal(a.it.term(), 2);
    } finally {
      await relay.close();
    }
  });

  it("gives the Lease up on stop, so the other takes it at once rather than after the lease duration", async () => {
    const a = elector("hand-over", "pod-a");
    await eventually("pod-a acting", () => a.it.acting());
    const b = elector("hand-over", "pod-b");
    await sleep(timing.retryPeriodMs * 3);
    const stoppedAt = performance.now();
    await a.it.stop();
    assert.equal(a.it.acting(), false);
    await eventually("pod-b acting", () => b.it.acting());
    assert.ok(performance.now() - stoppedAt < timing.leaseDurationMs, "taken before the lease could have expired");
  });

  describe("following cluster-autoscaler's Lease", () => {
    const caLease = (holder: string, resourceVersion?: string, name = "cluster-autoscaler") => ({
      metadata: { name, namespace: "kube-system", ...(resourceVersion && { resourceVersion }) },
      spec: { holderIdentity: holder, leaseDurationSeconds: 15, renewTime: new V1MicroTime(Date.now()) },
    });
    const follow = (hostname: string) => ({ followAutoscaler: { namespace: "kube-system", name: "cluster-autoscaler", hostname } });

    it("contends only beside the leading cluster-autoscaler, and hands over when the other CA leads", async () => {
      await leases.createNamespacedLease({ namespace: "kube-system", body: caLease("pod-b") });
      const a = elector("follow", "pod-a", follow("pod-a"));
      const b = elector("follow", "pod-b", follow("pod-b"));
      await eventually("pod-b acting", () => b.it.acting());
      await neverBoth(a.it, b.it, timing.leaseDurationMs);
      assert.equal(a.it.acting(), false, "pod-a's CA does not lead");
      assert.equal(a.it.holder(), b.identity, "pod-a, passive beside a CA that does not lead, names the one acting");

      const current = await leases.readNamespacedLease({ name: "cluster-autoscaler", namespace: "kube-system" });
      await leases.replaceNamespacedLease({
        name: "cluster-autoscaler",
        namespace: "kube-system",
        body: caLease("pod-a", current.metadata?.resourceVersion),
      });
      const changedAt = performance.now();
      const watching = neverBoth(a.it, b.it, timing.leaseDurationMs);
      await eventually("pod-a acting", () => a.it.acting(), 2 * timing.leaseDurationMs);
      await watching;
      // pod-b gave plugpool's Lease up: pod-a did not wait for it to expire.
      const took = a.changes.find((c) => c.acting)?.at ?? Number.NaN;
      assert.ok(took - changedAt < timing.leaseDurationMs, `handed over ${Math.round(took - changedAt)} ms after CA's leader changed`);
      assert.equal(b.it.holder(), a.identity, "pod-b, passive now, names the one acting");
    });

    it("counts a lapse from while its CA did not lead: taken at once when its CA comes to lead", async () => {
      const relay = await startRelay(new URL(plane.server));
      try {
        await leases.createNamespacedLease({ namespace: "kube-system", body: caLease("pod-b", undefined, "lapse-ca") });
        const followLapse = (hostname: string) => ({ followAutoscaler: { namespace: "kube-system", name: "lapse-ca", hostname } });
        const b = elector("follow-lapse", "pod-b", { ...followLapse("pod-b"), kc: through(plane.admin(), relay.url) });
        await eventually("pod-b acting", () => b.it.acting());
        const a = elector("follow-lapse", "pod-a", followLapse("pod-a"));
        await eventually("pod-a names pod-b", () => a.it.holder() === b.identity);
        // pod-b can no longer renew (its pod died with its CA): its Lease runs out while pod-a's CA does not lead.
        relay.cut();
        await sleep(timing.leaseDurationMs + 2 * timing.retryPeriodMs);
        assert.equal(a.it.acting(), false);

        const current = await leases.readNamespacedLease({ name: "lapse-ca", namespace: "kube-system" });
        await leases.replaceNamespacedLease({
          name: "lapse-ca",
          namespace: "kube-system",
          body: caLease("pod-a", current.metadata?.resourceVersion, "lapse-ca"),
        });
        const changedAt = performance.now();
        await eventually("pod-a acting", () => a.it.acting(), 2 * timing.leaseDurationMs);
        const took = (a.changes.find((c) => c.acting)?.at ?? Number.NaN) - changedAt;
        assert.ok(took < timing.leaseDurationMs / 2, `took the lapsed Lease ${Math.round(took)} ms after its CA came to lead`);
      } finally {
        await relay.close();
      }
    });

    it("contends as usual where cluster-autoscaler keeps no Lease (it does not elect)", async () => {
      const a = elector("no-ca-lease", "pod-a", { followAutoscaler: { namespace: "kube-system", name: "no-such-lease", hostname: "pod-a" } });
      await eventually("pod-a acting", () => a.it.acting());
    });
  });
});
