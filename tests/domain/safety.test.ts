import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION, mayCutPower, type Verdict } from "../../src/domain/index.ts";
import { CONDITION_TIME_RESOLUTION_MS, freshVerdict, watchShutdownNode, type CutKind } from "../../src/domain/safety.ts";
import type { NodeView } from "../../src/domain/model.ts";
import type { PoolContext } from "../../src/domain/context.ts";
import { beginPowerOff } from "../../src/domain/lifecycle.ts";
import { readPlug } from "../../src/domain/switching.ts";
import type { PowerOffFacts, PowerOffJob, PowerOffRun } from "../../src/domain/power-off-job.ts";
import { type WorldOptions } from "../harness/fakes/world.ts";
import { PREFIX, World } from "../harness/fakes/world.ts";
import { rejectsWith } from "../harness/fakes/assertions.ts";

describe("mayCutPower()", () => {
  const world = (): World => new World({ groups: [{ id: "g", machines: ["m-1", "m-2"], hold: ["m-2"] }] });

  it("allows a machine no Node stands for", () => {
    const w = world();
    assert.deepEqual(mayCutPower(w.machine("m-1"), w.cluster, PREFIX), { allowed: true });
  });

  it("allows a registered machine whose Node carries the ToBeDeleted taint", () => {
    const w = world();
    w.registerTainted("m-1");
    assert.deepEqual(mayCutPower(w.machine("m-1"), w.cluster, PREFIX), { allowed: true });
  });

  it("refuses a registered machine without the taint", () => {
    const w = world();
    w.register("m-1");
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "registered-without-taint");
  });

  it("refuses a registered machine whose Node carries other taints, even cluster-autoscaler's deletion-candidate one", () => {
    // Only ToBeDeleted says CA has drained the Node; DeletionCandidate marks one it merely considers removing.
    const w = world();
    w.register("m-1", {
      taints: [
        { key: "DeletionCandidateOfClusterAutoscaler", value: "1", effect: "PreferNoSchedule" },
        { key: "node.kubernetes.io/unschedulable", value: "", effect: "NoSchedule" },
      ],
    });
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "registered-without-taint");
  });

  it("refuses when a Node carries the machine's name under a foreign providerID without the taint", () => {
    const w = world();
    w.cluster.addNode({ name: "m-1", providerID: "aws:///i-1" });
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "registered-without-taint");
  });

  it("refuses when any of two Nodes standing for the machine lacks the taint", () => {
    const w = world();
    w.cluster.addNode({ name: "elsewhere", providerID: PREFIX + "m-1" });
    w.cluster.taint("elsewhere");
    w.cluster.addNode({ name: "m-1", providerID: "aws:///i-1" });
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.match(verdict.allowed ? "" : verdict.detail, /node m-1 is registered without/);
  });

  it("refuses a machine held in the configuration or by annotation, even when tainted", () => {
    const w = world();
    assert.equal(mayCutPower(w.machine("m-2"), w.cluster, PREFIX).allowed, false);
    w.registerTainted("m-1");
    w.cluster.annotate("m-1", HOLD_ANNOTATION, "");
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "held");
    w.cluster.annotate("m-1", HOLD_ANNOTATION, "false");
    assert.equal(mayCutPower(w.machine("m-1"), w.cluster, PREFIX).allowed, true);
  });
});

// The last check of an unregistered cut runs at the plug, after the command's wait for its device: what changed
// during that wait is seen only there (cutUnregistered's own checks ran before it).
describe("the verdict at the plug for a machine cut unregistered", () => {
  async function switchedOn(): Promise<World> {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    return w;
  }

  it("keeps the power of a machine whose Node registered while the switch-off waited for the device", async () => {
    const w = await switchedOn();
    w.power.onCall = (c) => {
      if (c.op === "turnOff") w.register("worker-1");
    };
    await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "unsafe", /worker-1 registered meanwhile \(node worker-1\)/);
    assert.equal(w.power.callsOf("turnOff").length, 1, "refused at the plug, not before");
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.equal(w.reporter.of("refused").at(-1)?.rule, "registered-without-taint");
  });

  it("keeps the power when the Nodes claiming the machine cannot be read at the plug", async () => {
    const w = await switchedOn();
    w.cluster.failNext("nodesClaiming");
    await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "unsafe", /the Nodes of worker-1 could not be read/);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.equal(w.reporter.of("refused").at(-1)?.rule, "view-not-current");
    assert.deepEqual(w.reporter.of("plug-off"), []);
  });

  it("keeps the power of a machine whose power-on record ended while the switch-off waited for the device", async () => {
    // As when a refresh saw a Node (which ends the record) that is gone again by the time the plug is reached.
    const w = await switchedOn();
    w.power.onCall = (c) => {
      if (c.op === "turnOff") w.records.endPowerOn("worker-1");
    };
    await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "unsafe", /worker-1 was not switched on by plugpool/);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.equal(w.reporter.of("refused").at(-1)?.rule, "powered-outside");
  });
});


// The verdict at the plug stands on its own: each refusal holds whatever its callers checked before, so each is
// tried here on a domain context whose memory the test sets by hand.
describe("freshVerdict() at the plug", () => {
  const SITE: WorldOptions = { groups: [{ id: "workers", machines: ["worker-1", "worker-2"], sensors: ["worker-2"] }] };

  /** A context over the world's fakes, as the pool builds it: the view for the cluster, the fakes' truth read fresh. */
  /** Puts a power-off job of worker-1 in the context's memory, under its Node as it stands now. */
  function jobOf(w: World, ctx: PoolContext, facts: PowerOffFacts, job: Partial<PowerOffRun> = {}): PowerOffJob {
    const made = {
      node: "worker-1",
      facts,
      shutdownNodeUid: w.cluster.nodeNamed("worker-1")?.uid,
      shutdownNodeSeen: { notReadyAt: undefined, readyAgain: false },
      ...job,
    } as unknown as PowerOffJob;
    beginPowerOff(ctx, w.machine("worker-1"), made);
    return made;
  }

  const verdictOf = (ctx: PoolContext, w: World, kind: CutKind | "shutdown", name = "worker-1") => freshVerdict(ctx, w.machine(name), kind);

  function refusal(verdict: Verdict): { rule: string; detail: string } {
    if (verdict.allowed) assert.fail("allowed, where a refusal was expected");
    return { rule: verdict.rule, detail: verdict.detail };
  }

  describe("what every cut of a registered machine needs", () => {
    it("names the machine held in the configuration, the Node carrying the hold and an untainted Node of another name", () => {
      const w = new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"], hold: ["worker-1"] }] });
      w.registerTainted("worker-1");
      assert.match(refusal(mayCutPower(w.machine("worker-1"), w.cluster, PREFIX)).detail, /^worker-1 is held in the configuration$/);
      w.registerTainted("worker-2");
      w.cluster.annotate("worker-2", HOLD_ANNOTATION, "");
      assert.match(refusal(mayCutPower(w.machine("worker-2"), w.cluster, PREFIX)).detail, /^node worker-2 carries the hold annotation$/);
      w.cluster.annotate("worker-2", HOLD_ANNOTATION, undefined);
      w.cluster.addNode({ name: "host-b", providerID: PREFIX + "worker-2" });
      assert.match(refusal(mayCutPower(w.machine("worker-2"), w.cluster, PREFIX)).detail, /^node host-b \(machine worker-2\) is registered without/);
      w.cluster.untaint("worker-2");
      w.cluster.removeNode("host-b");
      assert.match(refusal(mayCutPower(w.machine("worker-2"), w.cluster, PREFIX)).detail, /^node worker-2 is registered without/);
    });

    it("refuses on a view not known to be current, saying so", async () => {
      const w = new World(SITE);
      const ctx = w.context({ cluster: w.view ?? w.cluster });
      w.cluster.viewCurrent = false;
      const { rule, detail } = refusal(await verdictOf(ctx, w, "unregistered"));
      assert.equal(rule, "view-not-current");
      assert.equal(detail, "the cluster view is not known to be current");
    });

    it("honours a Node the lagging view still shows beside those read fresh", async () => {
      // host-b claims worker-1 by providerID, Ready and untainted: gone at the apiserver, still in the view.
      const w = new World({ ...SITE, lagging: true });
      const ctx = w.context({ cluster: w.view ?? w.cluster });
      w.registerTainted("worker-1");
      w.cluster.setReady("worker-1", false, w.clock.now());
      w.cluster.addNode({ name: "host-b", providerID: PREFIX + "worker-1" });
      w.view?.sync();
      w.cluster.removeNode("host-b");
      jobOf(w, ctx, { notReady: w.clock.now() });
      assert.match(refusal(await verdictOf(ctx, w, "power-off")).detail, /host-b/);
    });

    it("honours the view's Nodes when the apiserver shows none, once the draw read standby", async () => {
      const w = new World({ ...SITE, lagging: true });
      const ctx = w.context({ cluster: w.view ?? w.cluster });
      w.register("worker-1");
      w.view?.sync();
      w.cluster.removeNode("worker-1");
      jobOf(w, ctx, { notReady: w.clock.now(), standbyReached: w.clock.now() });
      assert.match(refusal(await verdictOf(ctx, w, "power-off")).detail, /^node worker-1 is Ready again/);
    });
  });

  describe("the cut that ends a power-off", () => {
    it("refuses when the drained Node vanished and nothing says the machine is down", async () => {
      const w = new World(SITE);
      const ctx = w.context({ cluster: w.view ?? w.cluster });
      jobOf(w, ctx, { notReady: w.clock.now() }, { node: "worker-1" });
      const { rule, detail } = refusal(await verdictOf(ctx, w, "power-off"));
      assert.equal(rule, "node-vanished");
      assert.equal(detail, "node worker-1 vanished before the cut; no sign worker-1 is down");
    });

    it("goes ahead without the Node once the draw read standby, or when the power-off began without one", async () => {
      const w = new World(SITE);
      const ctx = w.context({ cluster: w.view ?? w.cluster });
      jobOf(w, ctx, { notReady: w.clock.now(), standbyReached: w.clock.now() });
      assert.deepEqual(await verdictOf(ctx, w, "power-off"), { allowed: true });
      const other = w.context({ cluster: w.view ?? w.cluster });
      jobOf(w, other, {}, { node: "" });
      assert.deepEqual(await verdictOf(other, w, "power-off"), { allowed: true });
    });

    it("judges a Ready Node only past the shutdown: the shutdown itself, and a cut before any NotReady, go ahead", async () => {
      const w = new World(SITE);
      w.registerTainted("worker-1");
      const ctx = w.context({ cluster: w.view ?? w.cluster });
      jobOf(w, ctx, { notReady: w.clock.now() });
      assert.deepEqual(await verdictOf(ctx, w, "shutdown"), { allowed: true });
      assert.equal(refusal(await verdictOf(ctx, w, "power-off")).rule, "node-ready");
      const before = w.context({ cluster: w.view ?? w.cluster });
      jobOf(w, before, {});
      assert.deepEqual(await verdictOf(before, w, "power-off"), { allowed: true });
    });
  });

  describe("the off of a power cycle", () => {
    /** worker-1 registered, its shutdown asked 10 s ago under a job that has seen nothing of the Node since. */
    function asked(options: WorldOptions = SITE): { w: World; ctx: PoolContext; askedAt: number; job: PowerOffJob } {
      const w = new World(options);
      const ctx = w.context({ cluster: w.view ?? w.cluster });
      w.register("worker-1");
      const askedAt = w.clock.now();
      const job = jobOf(w, ctx, { shutdownRequested: askedAt });
      w.clock.advance(10_000);
      return { w, ctx, askedAt, job };
    }

    it("allows the off of a machine whose Node went NotReady after the shutdown was asked and stays so", async () => {
      const { w, ctx, askedAt } = asked();
      w.cluster.setReady("worker-1", false, askedAt - CONDITION_TIME_RESOLUTION_MS);
      assert.deepEqual(await verdictOf(ctx, w, "cycle"), { allowed: true });
    });

    it("refuses a Node Ready at the plug, though none of its NotReady was seen since the shutdown was asked", async () => {
      // NotReady and Ready again, both unseen: its Ready condition changed after the request, as a halt's would.
      const { w, ctx } = asked();
      w.cluster.setReady("worker-1", true, w.clock.now() - 5000);
      const { rule, detail } = refusal(await verdictOf(ctx, w, "cycle"));
      assert.equal(rule, "node-ready");
      assert.equal(detail, "node worker-1 is Ready; worker-1 runs");
    });

    it("refuses a Node NotReady since another moment than the one first seen: it was Ready in between", async () => {
      const { w, ctx, job } = asked();
      w.cluster.setReady("worker-1", false, w.clock.now() - 5000);
      watchShutdownNode(job, w.cluster.nodes(), job.facts.shutdownRequested ?? 0);
      w.cluster.setReady("worker-1", false, w.clock.now() - 1000);
      const { rule, detail } = refusal(await verdictOf(ctx, w, "cycle"));
      assert.equal(rule, "node-ready");
      assert.match(detail, /^node worker-1 was Ready again after plugpool asked for the shutdown; worker-1 ran on$/);
    });

    it("refuses a Node NotReady since before the shutdown was asked: not that shutdown's doing", async () => {
      const { w, ctx, askedAt } = asked();
      w.cluster.setReady("worker-1", false, askedAt - CONDITION_TIME_RESOLUTION_MS - 1);
      const { rule, detail } = refusal(await verdictOf(ctx, w, "cycle"));
      assert.equal(rule, "registered-without-taint");
      assert.match(detail, /^node worker-1 is not the Node whose OS plugpool shut down, NotReady ever since; worker-1 keeps its power$/);
    });

    it("refuses when another Node claims the machine beside the one shut down", async () => {
      const { w, ctx } = asked();
      w.cluster.setReady("worker-1", false, w.clock.now() - 5000);
      w.cluster.addNode({ name: "host-c", providerID: PREFIX + "worker-1", ready: false, readyChangedAt: w.clock.now() - 5000 });
      assert.match(refusal(await verdictOf(ctx, w, "cycle")).detail, /^node host-c is not the Node whose OS plugpool shut down/);
    });

    it("refuses a held machine, a machine whose shutdown plugpool did not ask, and one whose Node vanished", async () => {
      const held = asked({ groups: [{ id: "workers", machines: ["worker-1"], hold: ["worker-1"] }] });
      held.w.cluster.setReady("worker-1", false, held.w.clock.now() - 5000);
      assert.equal(refusal(await verdictOf(held.ctx, held.w, "cycle")).rule, "held");

      const notAsked = new World(SITE);
      notAsked.register("worker-1", { ready: false });
      const uid = notAsked.cluster.nodeNamed("worker-1")?.uid;
      const jobs: readonly [PowerOffFacts, Partial<PowerOffRun>][] = [
        [{}, { shutdownNodeUid: uid }],
        [{ shutdownRequested: notAsked.clock.now() }, { shutdownNodeUid: undefined }],
      ];
      for (const [facts, job] of jobs) {
        const ctx = notAsked.context({ cluster: notAsked.view ?? notAsked.cluster });
        jobOf(notAsked, ctx, facts, job);
        const { rule, detail } = refusal(await verdictOf(ctx, notAsked, "cycle"));
        assert.equal(rule, "registered-without-taint");
        assert.equal(detail, "plugpool did not ask for the OS shutdown of worker-1");
      }
      const noJob = notAsked.context({ cluster: notAsked.view ?? notAsked.cluster });
      assert.equal(refusal(await verdictOf(noJob, notAsked, "cycle")).rule, "registered-without-taint");

      const vanished = asked();
      vanished.w.cluster.removeNode("worker-1");
      const { rule, detail } = refusal(await verdictOf(vanished.ctx, vanished.w, "cycle"));
      assert.equal(rule, "node-vanished");
      assert.equal(detail, "the Node of worker-1 vanished; no sign it is halted");
    });
  });

  describe("watchShutdownNode()", () => {
    const node = (uid: string, ready: boolean, readyChangedAt: number): NodeView =>
      ({ name: "worker-1", providerID: PREFIX + "worker-1", uid, ready, readyChangedAt, taints: [], annotations: {}, labels: {} });
    const job = (): PowerOffJob => ({ shutdownNodeUid: "uid-a", shutdownNodeSeen: { notReadyAt: undefined, readyAgain: false } }) as unknown as PowerOffJob;

    it("counts a NotReady from a whole second before the request, and none from earlier", () => {
      const asked = 100_000;
      const at = job();
      watchShutdownNode(at, [node("uid-a", false, asked - CONDITION_TIME_RESOLUTION_MS)], asked);
      assert.equal(at.shutdownNodeSeen.notReadyAt, asked - CONDITION_TIME_RESOLUTION_MS);
      const earlier = job();
      watchShutdownNode(earlier, [node("uid-a", false, asked - CONDITION_TIME_RESOLUTION_MS - 1)], asked);
      assert.equal(earlier.shutdownNodeSeen.notReadyAt, undefined);
    });

    it("watches only the Node shut down, and sees it Ready again after its NotReady", () => {
      const asked = 100_000;
      const watched = job();
      watchShutdownNode(watched, [node("uid-b", true, asked + 5000), node("uid-a", false, asked + 2000)], asked);
      assert.deepEqual(watched.shutdownNodeSeen, { notReadyAt: asked + 2000, readyAgain: false });
      watchShutdownNode(watched, [node("uid-a", true, asked + 9000)], asked);
      assert.equal(watched.shutdownNodeSeen.readyAgain, true);
    });
  });

  describe("the cut of a machine without a Node", () => {
    function switchedOn(name: string, options: WorldOptions = SITE): { w: World; ctx: PoolContext } {
      const w = new World({ ...options, on: [name], poweredByPlugpool: [name] });
      return { w, ctx: w.context({ cluster: w.view ?? w.cluster }) };
    }

    /** The machine's sensor draws `watts`, and plugpool has read it so. */
    async function readsWatts(ctx: PoolContext, w: World, name: string, watts: number): Promise<void> {
      w.power.setWatts(w.machine(name).power, watts);
      assert.equal((await readPlug(ctx, w.machine(name)))?.watts, watts);
    }

    it("refuses a machine held in the configuration", async () => {
      const { w, ctx } = switchedOn("worker-1", { groups: [{ id: "workers", machines: ["worker-1"], hold: ["worker-1"] }] });
      const { rule, detail } = refusal(await verdictOf(ctx, w, "unregistered"));
      assert.equal(rule, "held");
      assert.equal(detail, "worker-1 is held in the configuration");
    });

    it("cuts a machine whose draw is at standby, not one drawing more", async () => {
      const { w, ctx } = switchedOn("worker-2");
      await readsWatts(ctx, w, "worker-2", w.config.powerOff.standbyWatts);
      assert.deepEqual(await verdictOf(ctx, w, "unregistered", "worker-2"), { allowed: true });
      await readsWatts(ctx, w, "worker-2", 80);
      const { rule, detail } = refusal(await verdictOf(ctx, w, "unregistered", "worker-2"));
      assert.equal(rule, "powered-outside");
      assert.equal(detail, "worker-2 draws 80 W with no Node (it may run under another name) and keeps its power");
    });
  });
});
