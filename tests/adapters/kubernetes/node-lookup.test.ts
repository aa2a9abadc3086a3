// The Nodes that claim a machine, read from a real kube-apiserver at the moment of asking.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createKubernetesNodeLookup } from "../../../src/adapters/kubernetes/node-lookup.ts";
import { isPlugpoolError } from "../../../src/domain/errors.ts";
import type { NodeLookup } from "../../../src/domain/ports.ts";
import { startControlPlane, type ControlPlane } from "../../support/control-plane.ts";
import { nodeBody } from "./support.ts";

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
});
