// Reading a power-off pod back into the domain's view: in particular, when its status says it cannot run.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { powerOffPodManifest, toPowerOffPodView } from "../../../src/adapters/kubernetes/power-off-pod.ts";

const manifest = powerOffPodManifest({ namespace: "plugpool", image: "busybox:1.37.0", machine: "worker-1", nodeName: "worker-1", startedAt: 42 });

/** The manifest as JSON from the apiserver, with `status`. */
function withStatus(status: unknown): unknown {
  const json = JSON.parse(JSON.stringify(manifest)) as Record<string, unknown>;
  return { ...json, status };
}

const waiting = (reason: string): unknown => ({
  phase: "Pending",
  containerStatuses: [{ name: "power-off", ready: false, restartCount: 0, image: "busybox:1.37.0", imageID: "", state: { waiting: { reason, message: "…" } } }],
});

describe("toPowerOffPodView()", () => {
  it("reads a pod without status as pending and not stuck", () => {
    assert.deepEqual(toPowerOffPodView(withStatus(undefined)), {
      machine: "worker-1", nodeName: "worker-1", startedAt: 42, phase: "Pending", terminating: false,
    });
  });

  it("says a pod the scheduler cannot place is stuck as Unschedulable", () => {
    const view = toPowerOffPodView(withStatus({
      phase: "Pending",
      conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message: "0/3 nodes are available" }],
    }));
    assert.equal(view?.stuck, "Unschedulable");
  });

  it("does not count another reason for not being scheduled yet", () => {
    const view = toPowerOffPodView(withStatus({ phase: "Pending", conditions: [{ type: "PodScheduled", status: "False", reason: "SchedulingGated" }] }));
    assert.equal(view?.stuck, undefined);
  });

  for (const reason of ["ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"]) {
    it(`says a container waiting with ${reason} is stuck`, () => {
      assert.equal(toPowerOffPodView(withStatus(waiting(reason)))?.stuck, reason);
    });
  }

  it("does not count a container that is still being created", () => {
    assert.equal(toPowerOffPodView(withStatus(waiting("ContainerCreating")))?.stuck, undefined);
    assert.ok(!("stuck" in (toPowerOffPodView(withStatus(waiting("ContainerCreating"))) ?? {})), "absent, not undefined");
  });

  it("does not count a running pod", () => {
    const view = toPowerOffPodView(withStatus({
      phase: "Running",
      conditions: [{ type: "PodScheduled", status: "True" }],
      containerStatuses: [{ name: "power-off", ready: true, restartCount: 0, image: "", imageID: "", state: { running: { startedAt: "2026-01-01T00:00:00Z" } } }],
    }));
    assert.equal(view?.phase, "Running");
    assert.equal(view.stuck, undefined);
  });
});
