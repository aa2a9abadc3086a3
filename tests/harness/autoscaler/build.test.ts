// Smoke test of the real cluster-autoscaler that tests/harness/autoscaler/build.sh builds: it runs
// its loop against a real API server and speaks the externalgrpc protocol to plugpool's gRPC
// transport, here serving a recording stub provider.
import { CoreV1Api } from "@kubernetes/client-node";
import type { Interceptor } from "@connectrpc/connect";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CloudProvider } from "../../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import { startGrpcServer, type GrpcServer } from "../../../src/adapters/grpc/server.ts";
import {
  autoscalerArchive,
  autoscalerMissing,
  autoscalerNotBuilt,
  startAutoscaler,
  type RunningAutoscaler,
} from "./autoscaler.ts";
import { startControlPlane, type ControlPlane } from "../control-plane/index.ts";

interface Call {
  readonly method: string;
  /** The request's node group id, for the methods that name one. */
  readonly id?: string;
}

/** Every call the stub answered, in order, and a way to wait for one. */
class CallLog {
  readonly calls: Call[] = [];
  private readonly waiters = new Set<() => void>();

  readonly interceptor: Interceptor = (next) => (request) => {
    const message: object = request.message;
    const id = "id" in message && typeof message.id === "string" ? message.id : undefined;
    this.calls.push({ method: request.method.name, ...(id !== undefined && { id }) });
    for (const wake of this.waiters) wake();
    return next(request);
  };

  methods(): string[] {
    return this.calls.map((call) => call.method);
  }

  /** The distinct node group ids that calls of `method` named. */
  ids(method: string): string[] {
    return [...new Set(this.calls.filter((call) => call.method === method).map((call) => call.id))].filter((id) => id !== undefined);
  }

  /** Resolves once `method` has been called `times` times; rejects after `timeoutMs`, with `describe()`. */
  async waitFor(method: string, times: number, timeoutMs: number, describe: () => string): Promise<void> {
    const seen = (): boolean => this.calls.filter((call) => call.method === method).length >= times;
    if (seen()) return;
    let wake = (): void => undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        wake = () => { if (seen()) resolve(); };
        this.waiters.add(wake);
        timer = setTimeout(() => {
          reject(new Error(`not ${times} ${method} calls within ${timeoutMs} ms (calls: ${this.methods().join(", ")}); ${describe()}`));
        }, timeoutMs);
      });
    } finally {
      this.waiters.delete(wake);
      clearTimeout(timer);
    }
  }
}

const group = { id: "stub-pool", minSize: 0, maxSize: 2, debug: "stub" };
const firstLoopMs = 90_000;

// Where the source archive ships, every scenario with the real CA must run: an unbuilt binary fails here,
// by name, rather than skipping them quietly.
it("cluster-autoscaler is built wherever its source archive ships, as released and with dra-template.patch", {
  skip: autoscalerArchive() === undefined && "no cluster-autoscaler source archive here (shared/vendor beside the repository)",
}, () => {
  assert.equal(autoscalerNotBuilt("release"), undefined);
  assert.equal(autoscalerNotBuilt("dra-template"), undefined);
});

describe("cluster-autoscaler built by tests/harness/autoscaler/build.sh", { skip: autoscalerMissing() }, () => {
  let plane: ControlPlane;
  let server: GrpcServer;
  let autoscaler: RunningAutoscaler;
  const log = new CallLog();
  // Run in reverse by after(), which also runs when before() failed half way.
  const cleanups: (() => Promise<void> | void)[] = [];
  const logTail = (): string => `cluster-autoscaler ${autoscaler.args.join(" ")}; its log:\n${autoscaler.process.logTail()}`;

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), "plugpool-autoscaler-"));
    cleanups.push(() => { rmSync(dir, { recursive: true, force: true }); });
    plane = await startControlPlane();
    cleanups.push(() => plane.stop());
    server = await startGrpcServer({
      host: "127.0.0.1",
      port: 0,
      interceptors: [log.interceptor],
      // The methods CA needs for a loop over one empty group; the rest answer Unimplemented.
      routes: (router) => router.service(CloudProvider, {
        refresh: () => ({}),
        nodeGroups: () => ({ nodeGroups: [group] }),
        nodeGroupForNode: () => ({}),
        nodeGroupTargetSize: () => ({ targetSize: 0 }),
        nodeGroupNodes: () => ({ instances: [] }),
        gPULabel: () => ({ label: "" }),
        getAvailableGPUTypes: () => ({}),
        cleanup: () => ({}),
      }),
    });
    cleanups.push(() => server.close());
    autoscaler = await startAutoscaler({
      kubeconfigPath: plane.kubeconfigPath,
      grpcAddress: `127.0.0.1:${server.port}`,
      dir,
    });
    cleanups.push(() => autoscaler.process.stop());
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it("lists the node groups again after each Refresh, since Refresh clears its cache", async () => {
    await log.waitFor("Refresh", 2, firstLoopMs, logTail);
    const methods = log.methods();
    const first = methods.indexOf("Refresh");
    const loop = methods.slice(first + 1, methods.indexOf("Refresh", first + 1));
    assert.ok(loop.includes("NodeGroups"), methods.join(", "));
  });

  it("asks for the target size of the node group the provider lists", async () => {
    await log.waitFor("NodeGroupTargetSize", 1, firstLoopMs, logTail);
    assert.deepEqual(log.ids("NodeGroupTargetSize"), [group.id]);
  });

  it("asks for a template node of the group, which has no nodes yet", async () => {
    await log.waitFor("NodeGroupTemplateNodeInfo", 1, firstLoopMs, logTail);
    assert.deepEqual(log.ids("NodeGroupTemplateNodeInfo"), [group.id]);
  });

  it("writes its status ConfigMap, which names the node group", async () => {
    // A second loop starts only after the first has written its status.
    await log.waitFor("Refresh", 2, firstLoopMs, logTail);
    const core = plane.admin().makeApiClient(CoreV1Api);
    const status = await core.readNamespacedConfigMap({ namespace: "kube-system", name: "cluster-autoscaler-status" });
    assert.match(status.data?.status ?? "", new RegExp(group.id));
  });

  it("calls Cleanup when it is stopped", async () => {
    await autoscaler.process.stop();
    assert.equal(autoscaler.process.running(), false);
    assert.ok(log.methods().includes("Cleanup"), log.methods().join(", "));
  });
});
