// plugpool's reports as Events on Nodes: what each becomes, how repeats are counted, and that reporting
// never fails the caller.
import { CoreV1Api, type CoreV1Event } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createKubernetesEventRecorder, nodeEvent } from "../../../src/adapters/kubernetes/events.ts";
import type { PoolEvent } from "../../../src/domain/events.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { machine } from "./support.ts";

describe("nodeEvent()", () => {
  const cases: [PoolEvent, string, string, string][] = [
    [{ type: "powered-on", machine: "w1", group: "g", confirmed: true }, "w1", "Normal", "PoweredOn"],
    [{ type: "power-on-failed", machine: "w1", group: "g", error: "timeout" }, "w1", "Warning", "PowerOnFailed"],
    [{ type: "power-on-queued", machine: "w1", group: "g" }, "w1", "Normal", "PowerOnQueued"],
    [{ type: "booted", machine: "w1", group: "g", node: "w1.lan", durationMs: 84_000 }, "w1.lan", "Normal", "Booted"],
    [{ type: "power-restored", machine: "w1", group: "g", node: "w1.lan" }, "w1.lan", "Warning", "PowerRestored"],
    [{ type: "quarantined", machine: "w1", group: "g", until: 0, failures: 2, reason: "never registered" }, "w1", "Warning", "Quarantined"],
    [{ type: "power-off-started", machine: "w1", node: "w1.lan", resumed: false }, "w1.lan", "Normal", "PowerOffStarted"],
    [{ type: "power-off-step", machine: "w1", step: "plug-off", outcome: "failed", detail: "unreachable" }, "w1", "Warning", "PowerOffStepFailed"],
    [{ type: "plug-off", machine: "w1", reason: "power-off", watts: 2 }, "w1", "Normal", "PlugOff"],
    [{ type: "node-deleted", machine: "w1", node: "w1.lan" }, "w1.lan", "Normal", "NodeDeleted"],
    [{ type: "power-off-finished", machine: "w1", durationMs: 95_000 }, "w1", "Normal", "PowerOffFinished"],
    [{ type: "power-off-aborted", machine: "w1", reason: "taint removed" }, "w1", "Warning", "PowerOffAborted"],
    [{ type: "refused", machine: "w1", rule: "registered-without-taint", detail: "no taint" }, "w1", "Warning", "PowerOffRefused"],
    [{ type: "plug-read-failed", machine: "w1", error: "timeout" }, "w1", "Warning", "PlugReadFailed"],
    [{ type: "provider-id-mismatch", machine: "w1", providerID: "aws://w1", expected: "k3s://w1" }, "w1", "Warning", "ProviderIDMismatch"],
    [{ type: "unexpected-power", machine: "w1", detail: "plug on, nobody asked" }, "w1", "Warning", "UnexpectedPower"],
    [{ type: "template-slices-differ", machine: "w1", group: "g", differing: ["w2"], detail: "GPU model" }, "w1", "Warning", "TemplateSlicesDiffer"],
  ];
  for (const [event, node, type, reason] of cases) {
    it(`turns ${event.type} into a ${type} ${reason} Event on Node ${node}`, () => {
      assert.deepEqual({ ...nodeEvent(event), message: undefined }, { node, type, reason, message: undefined });
    });
  }

  it("leaves out power-off steps that did not fail", () => {
    assert.equal(nodeEvent({ type: "power-off-step", machine: "w1", step: "grace", outcome: "waiting", detail: "" }), undefined);
  });

  it("says in the message what happened", () => {
    assert.equal(nodeEvent({ type: "power-off-finished", machine: "w1", durationMs: 95_000 })?.message, "power-off of w1 finished in 95s");
    assert.equal(
      nodeEvent({ type: "booted", machine: "w1", group: "g", node: "w1", durationMs: 84_250 })?.message,
      "node w1 is Ready 84.3s after its plug was switched on",
    );
    assert.match(nodeEvent({ type: "power-on-failed", machine: "w1", group: "g", error: "plug timed out" })?.message ?? "", /plug timed out/);
  });
});

describe("createKubernetesEventRecorder()", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  const eventsOn = async (node: string): Promise<CoreV1Event[]> =>
    (await core.listNamespacedEvent({ namespace: "default", fieldSelector: `involvedObject.name=${node}` })).items;

  before(async () => {
    plane = await startControlPlane();
    core = plane.admin().makeApiClient(CoreV1Api);
  });
  after(async () => {
    await plane.stop();
  });

  it("records an Event on the machine's Node, with the Node's uid when known", async () => {
    const recorder = createKubernetesEventRecorder(plane.admin(), { nodeUid: (node) => (node === "worker-1" ? "uid-1" : undefined) });
    recorder.report({ type: "powered-on", machine: "worker-1", group: "workers", confirmed: true });
    await recorder.flushed();
    const [event, ...others] = await eventsOn("worker-1");
    assert.equal(others.length, 0);
    assert.equal(event?.type, "Normal");
    assert.equal(event.reason, "PoweredOn");
    assert.equal(event.count, 1);
    assert.equal(event.metadata.namespace, "default");
    assert.deepEqual(
      { kind: event.involvedObject.kind, name: event.involvedObject.name, uid: event.involvedObject.uid },
      { kind: "Node", name: "worker-1", uid: "uid-1" },
    );
    assert.equal(event.reportingComponent, "plugpool");
    assert.equal(event.source?.component, "plugpool");
  });

  it("counts a repeated reason on one Event within the window, and starts a new one after it", async () => {
    let now = 1_800_000_000_000;
    const recorder = createKubernetesEventRecorder(plane.admin(), { now: () => now, aggregateWindowMs: 60_000 });
    const failed: PoolEvent = { type: "plug-read-failed", machine: "worker-2", error: "timeout" };
    recorder.report(failed);
    now += 30_000;
    recorder.report(failed);
    now += 30_000;
    recorder.report({ ...failed, error: "refused" });
    recorder.report({ type: "unexpected-power", machine: "worker-2", detail: "on" });
    await recorder.flushed();
    let events = await eventsOn("worker-2");
    const readFailures = events.filter((e) => e.reason === "PlugReadFailed");
    const [readFailure, ...more] = readFailures;
    assert.ok(readFailure !== undefined && more.length === 0, "one PlugReadFailed Event");
    assert.equal(readFailure.count, 3);
    assert.match(readFailure.message ?? "", /refused/);
    assert.equal(readFailure.lastTimestamp?.getTime(), now);
    assert.equal(events.filter((e) => e.reason === "UnexpectedPower").length, 1);

    now += 61_000;
    recorder.report(failed);
    await recorder.flushed();
    events = await eventsOn("worker-2");
    assert.deepEqual(events.filter((e) => e.reason === "PlugReadFailed").map((e) => e.count).sort(), [1, 3]);
  });

  it("records only events about configured machines when given them", async () => {
    const recorder = createKubernetesEventRecorder(plane.admin(), { machines: [machine("worker-3")] });
    recorder.report({ type: "powered-on", machine: "elsewhere", group: "g", confirmed: true });
    recorder.report({ type: "powered-on", machine: "worker-3", group: "g", confirmed: true });
    await recorder.flushed();
    assert.equal((await eventsOn("elsewhere")).length, 0);
    assert.equal((await eventsOn("worker-3")).length, 1);
  });

  it("never throws from report() and counts each failed write", async () => {
    const noRights = await plane.asServiceAccount("default", "no-rights");
    const errors: unknown[] = [];
    const recorder = createKubernetesEventRecorder(noRights, { onError: (error) => errors.push(error) });
    recorder.report({ type: "powered-on", machine: "worker-4", group: "g", confirmed: true });
    recorder.report({ type: "unexpected-power", machine: "worker-4", detail: "on" });
    await recorder.flushed();
    assert.equal(errors.length, 2);
    assert.equal((await eventsOn("worker-4")).length, 0);
  });
});
