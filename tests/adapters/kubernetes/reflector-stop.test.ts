// Stopping the cluster view does not wait on a watch that was accepted but not answered yet: a proxy in front of
// the apiserver may hold back a quiet watch's response headers, and client-node then has no controller to abort
// until its 30 s idle timeout.
import { KubeConfig } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { createKubernetesClusterView } from "../../../src/adapters/kubernetes/cluster-view.ts";
import { machine } from "./support.ts";

/** Lists answer at once (empty, resourceVersion 1); watches are held open without a byte. */
function holdingServer(held: Set<ServerResponse>): Server {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://apiserver");
    if (url.searchParams.get("watch") === "true") {
      held.add(res);
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ kind: "List", apiVersion: "v1", metadata: { resourceVersion: "1" }, items: [] }));
  });
}

describe("the cluster view behind a proxy that holds back watch headers", () => {
  let server: Server;
  const held = new Set<ServerResponse>();
  let kc: KubeConfig;

  before(async () => {
    server = holdingServer(held);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
  });
  after(async () => {
    for (const res of held) res.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("stops at once while its watches wait for their first byte", async () => {
    const view = createKubernetesClusterView(kc, { powerOffNamespace: "plugpool", machines: [machine("worker-1")] });
    view.start();
    await view.whenSynced(AbortSignal.timeout(10_000));
    // Every collection listed; now each watch is open at the server and unanswered.
    for (let i = 0; i < 100 && held.size === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(held.size > 0, "the watches reached the server");
    const started = Date.now();
    await view.stop();
    const tookMs = Date.now() - started;
    // client-node's own idle timeout is 30 s; a stop that waited for it would take that long.
    assert.ok(tookMs < 5_000, `stop took ${tookMs} ms`);
  });
});
