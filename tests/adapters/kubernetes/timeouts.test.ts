// Every cluster call is bounded: against a server that accepts connections and never answers, each ends within
// its timeout, or when the caller's signal aborts, and the HTTP request itself is cancelled, not only the wait.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { createConfigMapWriter } from "../../../src/adapters/kubernetes/configmap.ts";
import { createKubernetesEventRecorder } from "../../../src/adapters/kubernetes/events.ts";
import { createKubernetesNodeLookup } from "../../../src/adapters/kubernetes/node-lookup.ts";
import { createKubernetesNodeTeardown } from "../../../src/adapters/kubernetes/node-teardown.ts";
import { createKubernetesPowerRecords } from "../../../src/adapters/kubernetes/power-records.ts";
import { isPlugpoolError, type ErrorCode } from "../../../src/domain/errors.ts";
import { eventually, machine } from "./support.ts";

const token = "never-shown-0123456789";
const timeoutMs = 300;
/** Timers and a loaded machine: generous, yet far below the 10 s default a missing bound would wait. */
const slackMs = 1_500;

function failure(code: ErrorCode, pattern: RegExp) {
  return (error: unknown): boolean => {
    assert.ok(isPlugpoolError(error), `a PlugpoolError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.match(error.message, pattern);
    assert.doesNotMatch(error.message, new RegExp(token));
    return true;
  };
}

describe("bounded cluster calls", () => {
  let server: Server;
  let kc: KubeConfig;
  const sockets = new Set<Socket>();
  let closed = 0;

  /** Resolves with how long `call` took to reject, once it has rejected as `check` expects. */
  const rejectsWithin = async (call: Promise<unknown>, check: (error: unknown) => boolean): Promise<number> => {
    const start = Date.now();
    await assert.rejects(call, check);
    return Date.now() - start;
  };
  /** The server saw the connection closed: the client gave up the request. */
  const requestCancelled = async (closedBefore: number): Promise<void> => {
    await eventually("the connection closed by the client", () => closed > closedBefore, 2_000);
  };

  before(async () => {
    server = createServer((socket) => {
      sockets.add(socket);
      // Read (and drop) what arrives, so that the client's FIN is seen.
      socket.resume();
      socket.on("error", () => undefined);
      socket.on("close", () => {
        sockets.delete(socket);
        closed += 1;
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    assert.ok(address !== null && typeof address === "object");
    kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "silent", server: `http://127.0.0.1:${address.port}`, skipTLSVerify: true }],
      users: [{ name: "plugpool", token }],
      contexts: [{ name: "silent", cluster: "silent", user: "plugpool" }],
      currentContext: "silent",
    });
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it("ends a NodeTeardown call after its timeout and cancels its request", async () => {
    const teardown = createKubernetesNodeTeardown(kc, { namespace: "plugpool", image: "busybox", machines: [machine("worker-1")], writeTimeoutMs: timeoutMs });
    const before = closed;
    const took = await rejectsWithin(
      teardown.markPowerOff("worker-1", { startedAt: 1, pending: false }),
      failure("cluster-refused", new RegExp(`recording the power-off on Node "worker-1" timed out after ${timeoutMs} ms`)),
    );
    assert.ok(took >= timeoutMs - 10 && took < timeoutMs + slackMs, `took ${took} ms`);
    await requestCancelled(before);
  });

  it("ends a call when the caller's signal aborts first, and says it was cancelled", async () => {
    const teardown = createKubernetesNodeTeardown(kc, { namespace: "plugpool", image: "busybox", machines: [machine("worker-1")] });
    const before = closed;
    const took = await rejectsWithin(
      teardown.deleteNode("worker-1", "a-uid", { signal: AbortSignal.timeout(timeoutMs) }),
      failure("cancelled", /deleting Node "worker-1" ended before it finished/),
    );
    assert.ok(took < timeoutMs + slackMs, `took ${took} ms`);
    await requestCancelled(before);
  });

  it("ends a node lookup after its timeout", async () => {
    const lookup = createKubernetesNodeLookup(kc, { timeoutMs });
    const before = closed;
    const took = await rejectsWithin(
      lookup.nodesClaiming("worker-1", "k3s://worker-1"),
      failure("cluster-refused", new RegExp(`reading Node "worker-1" and the Nodes with providerID "k3s://worker-1" timed out after ${timeoutMs} ms`)),
    );
    assert.ok(took < timeoutMs + slackMs, `took ${took} ms`);
    await requestCancelled(before);
  });

  it("ends a power-on record after its timeout, and the load of the records", async () => {
    const records = createKubernetesPowerRecords(kc, { namespace: "plugpool", machines: [machine("worker-1")], writeTimeoutMs: timeoutMs });
    try {
      const took = await rejectsWithin(
        records.recordPowerOn("worker-1", { at: 1, why: "scale-up" }),
        failure("cluster-refused", new RegExp(`writing ConfigMap plugpool/plugpool-records timed out after ${timeoutMs} ms`)),
      );
      assert.ok(took < timeoutMs + slackMs, `took ${took} ms`);
      await rejectsWithin(records.load(), failure("cluster-refused", /reading ConfigMap plugpool\/plugpool-records timed out/));
    } finally {
      records.stop();
    }
  });

  it("ends each attempt of a background ConfigMap write after its timeout, and tries again", async () => {
    const errors: unknown[] = [];
    const writer = createConfigMapWriter(kc.makeApiClient(CoreV1Api), { namespace: "plugpool", name: "plugpool-template-slices" }, {
      writeTimeoutMs: timeoutMs, retry: { initialMs: 50, maxMs: 50 }, onError: (error) => errors.push(error),
    });
    const before = closed;
    writer.later({ "worker-1": "[]" });
    try {
      await eventually("two attempts timed out", () => errors.length >= 2, 2 * timeoutMs + slackMs);
      for (const error of errors) failure("cluster-refused", /writing ConfigMap plugpool\/plugpool-template-slices timed out/)(error);
      await requestCancelled(before);
    } finally {
      writer.stop();
    }
    await writer.flushed();
  });

  it("ends an Event write after its timeout, reporting it, so the next one is not held up", async () => {
    const errors: unknown[] = [];
    const recorder = createKubernetesEventRecorder(kc, { writeTimeoutMs: timeoutMs, onError: (error) => errors.push(error) });
    const start = Date.now();
    recorder.report({ type: "plug-read-failed", machine: "worker-1", error: "timeout" });
    recorder.report({ type: "plug-read-failed", machine: "worker-2", error: "timeout" });
    await recorder.flushed();
    const took = Date.now() - start;
    assert.ok(took < 2 * timeoutMs + slackMs, `took ${took} ms`);
    assert.equal(errors.length, 2);
    for (const error of errors) failure("cluster-refused", /recording Event PlugReadFailed on Node "worker-\d" timed out/)(error);
  });
});
