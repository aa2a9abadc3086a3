// The reasons given for failed cluster calls never carry credentials: a request's own error quotes its URL, and
// a kubeconfig's server URL may hold a user name and password (plugpool refuses such a kubeconfig at start; this
// is the second line).
import { KubeConfig } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { apiserverReason } from "../../../src/adapters/kubernetes/api-errors.ts";
import { createKubernetesClusterView } from "../../../src/adapters/kubernetes/cluster-view.ts";
import { createKubernetesNodeLookup } from "../../../src/adapters/kubernetes/node-lookup.ts";
import { eventually, machine } from "./support.ts";

const PASSWORD = "S3cretPw-in-url";

function withCredentialsInServerUrl(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: `https://kubeadmin:${PASSWORD}@127.0.0.1:1` }],
    users: [{ name: "u", token: "t" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}

describe("reasons for failed cluster calls", () => {
  it("redact the user name and password of a server URL that carries them", async () => {
    const lookup = createKubernetesNodeLookup(withCredentialsInServerUrl());
    await assert.rejects(lookup.nodesClaiming("worker-1", ""), (error: unknown) => {
      assert.ok(error instanceof Error);
      assert.match(error.message, /^reading Node "worker-1" failed, the apiserver did not answer: .*https:\/\/\[redacted\]@127\.0\.0\.1:1\/api\/v1\/nodes/);
      assert.doesNotMatch(error.message, new RegExp(`kubeadmin|${PASSWORD}`));
      return true;
    });
  });

  it("redact them from the cluster watch's errors, as serve logs them", async () => {
    const logged: string[] = [];
    const view = createKubernetesClusterView(withCredentialsInServerUrl(), {
      powerOffNamespace: "plugpool",
      machines: [machine("worker-1")],
      onError: (error) => logged.push(apiserverReason(error)),
    });
    view.start();
    try {
      await eventually("a watch error", () => logged.length > 0, 5_000);
    } finally {
      await view.stop();
    }
    for (const line of logged) {
      assert.match(line, /\/\/\[redacted\]@127\.0\.0\.1:1\//);
      assert.doesNotMatch(line, new RegExp(`kubeadmin|${PASSWORD}`));
    }
  });
});
