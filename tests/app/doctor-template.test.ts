// `plugpool doctor` compares each registered machine's Node with its group's template (real apiserver, as the
// example ServiceAccount): a Node as its kubelet registers it passes; a difference that would make
// cluster-autoscaler plan with a node that does not exist fails the machine's template row, naming it.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { doctor, type DoctorReport } from "../../src/app/doctor.ts";
import { startControlPlane, type ControlPlane } from "../harness/control-plane/index.ts";
import { startPlugEmulator, type EmulatedPlug } from "../harness/plug-emulator/index.ts";
import { apply, createNamespace, exampleManifest, nodeBody } from "../adapters/kubernetes/support.ts";
import { config, group, load, node } from "./fixtures/config-builders.ts";

const NAMESPACE = "plugpool";
const MACHINES = ["w-same", "w-arch", "w-taints", "w-room", "w-gpu", "w-off"] as const;

/** What the kubelet of a machine of the group registers, before each case changes one thing. */
const KUBELET_LABELS = {
  "kubernetes.io/arch": "amd64",
  "kubernetes.io/os": "linux",
  "beta.kubernetes.io/arch": "amd64",
  "node.kubernetes.io/instance-type": "k3s",
  "example.com/pool": "workers",
};
const ALLOCATABLE = { cpu: "4", memory: "8Gi", pods: "110", "ephemeral-storage": "95Gi" };
const DEDICATED = { key: "example.com/dedicated", value: "batch", effect: "NoSchedule" };

describe("doctor: each registered machine's Node against its group's template (real apiserver)", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  let asPlugpool: KubeConfig;
  let plug: EmulatedPlug;
  let report: DoctorReport;

  const row = (machine: string) => {
    const found = report.rows.find((r) => r.area === "template" && r.subject.endsWith(`node ${machine}`));
    assert.ok(found, `a template row for ${machine} in\n${report.text}`);
    return found;
  };

  before(async () => {
    plane = await startControlPlane();
    const admin = plane.admin();
    core = admin.makeApiClient(CoreV1Api);
    await apply(admin, [...exampleManifest("namespace.yaml"), ...exampleManifest("rbac.yaml")]);
    await createNamespace(core, NAMESPACE);
    asPlugpool = await plane.asServiceAccount(NAMESPACE, "cluster-autoscaler");
    plug = await startPlugEmulator({ switches: MACHINES.map((name) => ({ name })) });
    const register = (name: string, change: { labels?: object; taints?: object[]; allocatable?: object } = {}) =>
      core.createNode({
        body: nodeBody({
          name,
          providerID: `k3s://${name}`,
          labels: { ...KUBELET_LABELS, ...change.labels },
          taints: (change.taints ?? [DEDICATED]) as never,
          allocatable: { ...ALLOCATABLE, ...change.allocatable },
        }),
      });
    await Promise.all([
      // Passing and transient taints (a cordon, CA's own) are no difference; 8192Mi is 8Gi.
      register("w-same", {
        taints: [
          DEDICATED,
          { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" },
          { key: "DeletionCandidateOfClusterAutoscaler", value: "1700000000", effect: "PreferNoSchedule" },
        ],
        allocatable: { memory: "8192Mi" },
      }),
      register("w-arch", { labels: { "kubernetes.io/arch": "arm64", "example.com/pool": undefined } }),
      register("w-taints", { taints: [{ key: "example.com/gpu-only", value: "", effect: "NoExecute" }] }),
      register("w-room", { allocatable: { cpu: "3500m", memory: "7Gi" } }),
      register("w-gpu", { allocatable: { "nvidia.com/gpu": "1" } }),
    ]);
    const doc = config([
      group("workers", MACHINES.map((name) => node(name, { url: plug.url, switch: name })), {
        template: { cpu: "4", memory: "8Gi", labels: { "example.com/pool": "workers" }, taints: [DEDICATED] },
      }),
    ]);
    report = await doctor(load(doc), { kubeConfig: asPlugpool });
  });
  after(async () => {
    await plug.close();
    await plane.stop();
  });

  it("passes a Node with the template's labels, taints and room, whatever the kubelet adds", () => {
    assert.equal(row("w-same").status, "ok", report.text);
    assert.match(row("w-same").detail, /has the template's labels and taints, and at least its allocatable/);
  });

  it("fails a Node whose arch differs and that lacks a template label, and says what CA would do", () => {
    const { status, detail } = row("w-arch");
    assert.equal(status, "FAIL");
    assert.match(detail, /label kubernetes\.io\/arch is arm64 on the Node, amd64 in the template/);
    assert.match(detail, /label example\.com\/pool=workers missing on the Node/);
    assert.match(detail, /CA would power a machine on for pods that select the template's labels/);
    assert.match(detail, /--node-labels/);
  });

  it("fails a Node that lacks the template's taint and carries one the template lacks", () => {
    const { status, detail } = row("w-taints");
    assert.equal(status, "FAIL");
    assert.match(detail, /taint example\.com\/dedicated=batch:NoSchedule of the template missing on the Node/);
    assert.match(detail, /taint example\.com\/gpu-only:NoExecute on the Node missing in the template/);
  });

  it("fails a Node with less allocatable than the template promises, naming each resource", () => {
    const { status, detail } = row("w-room");
    assert.equal(status, "FAIL");
    assert.match(detail, /cpu 4 in the template, 3500m allocatable on the Node/);
    assert.match(detail, /memory 8Gi in the template, 7Gi allocatable on the Node/);
    assert.doesNotMatch(detail, /pods \d/);
  });

  it("warns about an extended resource the Node offers and the template lacks", () => {
    const { status, detail } = row("w-gpu");
    assert.equal(status, "warn");
    assert.match(detail, /nvidia\.com\/gpu=1, which the template lacks/);
  });

  it("compares only registered machines, and fails the report", () => {
    assert.equal(report.rows.some((r) => r.area === "template" && r.subject.endsWith("node w-off")), false);
    assert.equal(report.ok, false);
    assert.deepEqual(
      report.rows.filter((r) => r.status === "FAIL").map((r) => r.subject),
      ["template workers vs node w-arch", "template workers vs node w-taints", "template workers vs node w-room"],
    );
  });
});
