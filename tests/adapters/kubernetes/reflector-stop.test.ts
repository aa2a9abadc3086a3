// Stopping the cluster view does not wait on a watch that was accepted but not answered yet: a proxy in front of
// the apiserver may hold back a quiet watch's response headers, and client-node then has no controller to abort
// until its 30 s idle timeout. And its stop signal, which lives across every watch renewal, does not gather a
// listener per renewal.
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

/** Lists answer at once (empty, resourceVersion 1); each watch ends at once without an event. Counts the watches. */
function endingServer(watches: { count: number }): Server {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://apiserver");
    res.writeHead(200, { "content-type": "application/json" });
    if (url.searchParams.get("watch") === "true") {
      watches.count += 1;
      res.end();
      return;
    }
    res.end(JSON.stringify({ kind: "List", apiVersion: "v1", metadata: { resourceVersion: "1" }, items: [] }));
  });
}

/**
 * Counts, per signal, the "abort" listeners added and not removed while `work` runs (a listener that fired stays
 * counted): the most any one signal ends with.
 */
async function mostAbortListeners(work: () => Promise<void>): Promise<number> {
  const net = new Map<EventTarget, number>();
  type Method<K extends "addEventListener" | "removeEventListener"> = (this: EventTarget, ...args: Parameters<EventTarget[K]>) => void;
  const addEventListener = Reflect.get(EventTarget.prototype, "addEventListener") as Method<"addEventListener">;
  const removeEventListener = Reflect.get(EventTarget.prototype, "removeEventListener") as Method<"removeEventListener">;
  EventTarget.prototype.addEventListener = function (this: EventTarget, ...args: Parameters<EventTarget["addEventListener"]>) {
    if (args[0] === "abort") net.set(this, (net.get(this) ?? 0) + 1);
    addEventListener.apply(this, args);
  };
  EventTarget.prototype.removeEventListener = function (this: EventTarget, ...args: Parameters<EventTarget["removeEventListener"]>) {
    if (args[0] === "abort") net.set(this, (net.get(this) ?? 0) - 1);
    removeEventListener.apply(this, args);
  };
  try {
    await work();
  } finally {
    EventTarget.prototype.addEventListener = addEventListener;
    EventTarget.prototype.removeEventListener = removeEventListener;
  }
  return Math.max(0, ...net.values());
}

describe("the cluster view across many watch renewals", () => {
  it("does not pile up listeners on its stop signal, one per renewal", async () => {
    const watches = { count: 0 };
    const server = endingServer(watches);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const view = createKubernetesClusterView(kc, { powerOffNamespace: "plugpool", machines: [machine("worker-1")] });
    try {
      const most = await mostAbortListeners(async () => {
        view.start();
        await view.whenSynced(AbortSignal.timeout(10_000));
        for (let i = 0; i < 500 && watches.count < 60; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      });
      assert.ok(watches.count >= 60, `the watches were renewed (${watches.count} watches)`);
      // Each collection renewed its watch some 20 times; a listener left per renewal would show here.
      assert.ok(most < 5, `a signal was left with ${most} abort listeners`);
    } finally {
      await view.stop();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
