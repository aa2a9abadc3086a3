// plugpool's records of its power-ons and quarantines against a real kube-apiserver: kept in ConfigMap
// plugpool-records so that a restart finds them, written key by key, and retried until they land.
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import {
  createKubernetesPowerRecords,
  POWER_RECORDS_CONFIGMAP,
  recordKey,
  type KubernetesPowerRecords,
  type KubernetesPowerRecordsOptions,
} from "../../../src/adapters/kubernetes/power-records.ts";
import { isPlugpoolError } from "../../../src/domain/errors.ts";
import { startControlPlane, type ControlPlane } from "../../support/control-plane.ts";
import { createNamespace, eventually, fastRetry, machine } from "./support.ts";

const namespace = "plugpool";
const longName = `${"rack-a.shelf-3.".repeat(16)}node-7`;
const machines = [machine("worker-1"), machine("worker-2", 1), machine("worker-3", 2), machine(longName, 3)];

describe("createKubernetesPowerRecords()", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  const started: KubernetesPowerRecords[] = [];

  /** A new instance, loaded: what plugpool has after a restart. */
  const fresh = async (options: Partial<KubernetesPowerRecordsOptions> = {}): Promise<KubernetesPowerRecords> => {
    const records = createKubernetesPowerRecords(plane.admin(), { namespace, machines, retry: fastRetry, ...options });
    started.push(records);
    await records.load(AbortSignal.timeout(10_000));
    return records;
  };
  const stored = async (ns = namespace): Promise<Record<string, string>> =>
    (await core.readNamespacedConfigMap({ name: POWER_RECORDS_CONFIGMAP, namespace: ns }).catch(() => undefined))?.data ?? {};

  before(async () => {
    plane = await startControlPlane();
    core = plane.admin().makeApiClient(CoreV1Api);
    await createNamespace(core, namespace);
  });
  after(async () => {
    for (const records of started) records.stop();
    await plane.stop();
  });

  it("holds no records while the ConfigMap does not exist", async () => {
    const records = await fresh();
    assert.equal(records.powerOn("worker-1"), undefined);
    assert.equal(records.quarantine("worker-1"), undefined);
  });

  it("stores a power-on before it shows it, and a restarted instance finds it", async () => {
    const records = await fresh();
    const recording = records.recordPowerOn("worker-1", { at: 1_700_000_000_000, why: "scale-up" });
    assert.equal(records.powerOn("worker-1"), undefined, "not shown before it is stored");
    await recording;
    assert.deepEqual(records.powerOn("worker-1"), { at: 1_700_000_000_000, why: "scale-up" });
    assert.deepEqual(JSON.parse((await stored())["power-on.worker-1"] ?? "null"), { at: 1_700_000_000_000, why: "scale-up" });
    const restarted = await fresh();
    assert.deepEqual(restarted.powerOn("worker-1"), { at: 1_700_000_000_000, why: "scale-up" });
  });

  it("ends a power-on at once in memory and removes its key in the background", async () => {
    const records = await fresh();
    assert.ok(records.powerOn("worker-1") !== undefined);
    records.endPowerOn("worker-1");
    assert.equal(records.powerOn("worker-1"), undefined);
    await records.flushed();
    assert.equal((await stored())["power-on.worker-1"], undefined);
    assert.equal((await fresh()).powerOn("worker-1"), undefined);
  });

  it("keeps a quarantine across a restart, and clears it", async () => {
    const records = await fresh();
    records.setQuarantine("worker-2", { until: 1_800_000_000_000, failures: 3 });
    assert.deepEqual(records.quarantine("worker-2"), { until: 1_800_000_000_000, failures: 3 }, "at once in memory");
    await records.flushed();
    assert.deepEqual(JSON.parse((await stored())["quarantine.worker-2"] ?? "null"), { until: 1_800_000_000_000, failures: 3 });
    const restarted = await fresh();
    assert.deepEqual(restarted.quarantine("worker-2"), { until: 1_800_000_000_000, failures: 3 });
    restarted.setQuarantine("worker-2", undefined);
    assert.equal(restarted.quarantine("worker-2"), undefined);
    await restarted.flushed();
    assert.equal((await stored())["quarantine.worker-2"], undefined);
    assert.equal((await fresh()).quarantine("worker-2"), undefined);
  });

  it("gives a machine whose name is near Kubernetes' limit a valid key of its own", async () => {
    const key = recordKey("quarantine", longName);
    assert.ok(key.length <= 253);
    assert.notEqual(recordKey("quarantine", `${longName}x`), key);
    const records = await fresh();
    await records.recordPowerOn(longName, { at: 5, why: "scale-up" });
    records.setQuarantine(longName, { until: 6, failures: 1 });
    await records.flushed();
    const restarted = await fresh();
    assert.deepEqual(restarted.powerOn(longName), { at: 5, why: "scale-up" });
    assert.deepEqual(restarted.quarantine(longName), { until: 6, failures: 1 });
  });

  it("ignores, and reports, keys of unconfigured machines and values it cannot read", async () => {
    await core.patchNamespacedConfigMap(
      {
        name: POWER_RECORDS_CONFIGMAP,
        namespace,
        body: {
          data: {
            "power-on.retired": JSON.stringify({ at: 1, why: "scale-up" }),
            "power-on.worker-2": "{not json",
            "quarantine.worker-3": JSON.stringify({ until: "soon", failures: 1 }),
            "something-else": "x",
            "quarantine.worker-1": JSON.stringify({ until: 1_900_000_000_000, failures: 2 }),
          },
        },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const errors: unknown[] = [];
    const records = await fresh({ onError: (error) => errors.push(error) });
    assert.equal(records.powerOn("worker-2"), undefined);
    assert.equal(records.quarantine("worker-3"), undefined);
    assert.deepEqual(records.quarantine("worker-1"), { until: 1_900_000_000_000, failures: 2 }, "the readable key is taken");
    const reported = errors.map(String).join("\n");
    for (const key of ["power-on.retired", "power-on.worker-2", "quarantine.worker-3", "something-else"]) {
      assert.match(reported, new RegExp(`"${key}"`));
    }
    assert.equal(errors.length, 4);
  });

  it("refuses to record a machine that is not configured, and writes nothing for it", async () => {
    const errors: unknown[] = [];
    const records = await fresh({ onError: (error) => errors.push(error) });
    errors.length = 0;
    await assert.rejects(records.recordPowerOn("stranger", { at: 1, why: "scale-up" }), /"stranger": it is not configured/);
    records.setQuarantine("stranger", { until: 1, failures: 1 });
    records.endPowerOn("stranger");
    await records.flushed();
    assert.equal(errors.length, 2);
    assert.equal(records.quarantine("stranger"), undefined);
    assert.deepEqual(Object.keys(await stored()).filter((k) => k.includes("stranger")), []);
  });

  it("creates the ConfigMap once when two instances write the first records at the same time", async () => {
    await createNamespace(core, "race");
    const a = createKubernetesPowerRecords(plane.admin(), { namespace: "race", machines });
    const b = createKubernetesPowerRecords(plane.admin(), { namespace: "race", machines });
    await Promise.all([
      a.recordPowerOn("worker-1", { at: 1, why: "scale-up" }),
      b.recordPowerOn("worker-2", { at: 2, why: "queued" }),
    ]);
    assert.deepEqual(Object.keys(await stored("race")).sort(), ["power-on.worker-1", "power-on.worker-2"]);
  });

  it("fails a power-on it cannot store, keeps retrying background writes, and lets the newest value of a key win", async () => {
    const errors: unknown[] = [];
    const records = await fresh({ onError: (error) => errors.push(error), writeTimeoutMs: 2_000 });
    await plane.stopApiServer();
    try {
      await assert.rejects(records.recordPowerOn("worker-3", { at: 7, why: "scale-up" }), (error: unknown) => {
        assert.ok(isPlugpoolError(error));
        assert.equal(error.code, "cluster-refused");
        assert.match(error.message, /ConfigMap plugpool\/plugpool-records/);
        return true;
      });
      assert.equal(records.powerOn("worker-3"), undefined, "memory changes only once the record is stored");
      records.setQuarantine("worker-3", { until: 10, failures: 1 });
      await eventually("a failed background write", () => errors.length >= 2);
      records.setQuarantine("worker-3", { until: 20, failures: 2 });
    } finally {
      await plane.startApiServer();
    }
    await records.flushed();
    const data = await stored();
    assert.deepEqual(JSON.parse(data["quarantine.worker-3"] ?? "null"), { until: 20, failures: 2 });
    assert.equal(data["power-on.worker-3"], undefined);
  });

  it("loses an end of a power-on that had not landed when it stopped: a restart finds the record standing", async () => {
    const records = await fresh();
    await records.recordPowerOn("worker-2", { at: 8, why: "scale-up" });
    await plane.stopApiServer();
    try {
      records.endPowerOn("worker-2");
      records.stop();
    } finally {
      await plane.startApiServer();
    }
    assert.deepEqual((await fresh()).powerOn("worker-2"), { at: 8, why: "scale-up" }, "what stored() is for");
  });

  it("stores an ended power-on at once when asked, so a store stopped right after brings no licence back", async () => {
    // The background waits a minute after a failure: only stored() can land the end in time.
    const records = await fresh({ writeTimeoutMs: 2_000, retry: { initialMs: 60_000, maxMs: 60_000 } });
    await records.recordPowerOn("worker-2", { at: 9, why: "scale-up" });
    await plane.stopApiServer();
    try {
      records.endPowerOn("worker-2");
      await assert.rejects(records.stored("worker-2"), (error: unknown) => {
        assert.ok(isPlugpoolError(error));
        assert.equal(error.code, "cluster-refused");
        assert.match(error.message, /ConfigMap plugpool\/plugpool-records/);
        return true;
      });
    } finally {
      await plane.startApiServer();
    }
    assert.deepEqual((await fresh()).powerOn("worker-2"), { at: 9, why: "scale-up" }, "not stored yet");
    await records.stored("worker-2");
    records.stop();
    assert.equal((await fresh()).powerOn("worker-2"), undefined);
    assert.equal((await stored())["power-on.worker-2"], undefined);
    await records.stored("worker-2");
    await records.stored("stranger");
  });

  it("stops retrying once stopped", async () => {
    const records = await fresh();
    records.setQuarantine("worker-1", { until: 25, failures: 1 });
    await records.flushed();
    await plane.stopApiServer();
    try {
      records.setQuarantine("worker-1", { until: 30, failures: 1 });
      records.stop();
      await records.flushed();
    } finally {
      await plane.startApiServer();
    }
    assert.deepEqual(JSON.parse((await stored())["quarantine.worker-1"] ?? "null"), { until: 25, failures: 1 });
  });
});

/**
 * An apiserver that keeps plugpool-records and answers its reads and merge patches, except that it can apply a
 * patch and never answer it: a write that landed, whose answer the client never gets.
 */
function recordsServer(data: Map<string, string>, held: Set<ServerResponse>, swallow: { next: boolean }): Server {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (chunk: Buffer) => { body += chunk.toString(); });
    req.on("end", () => {
      if (req.method === "PATCH") {
        const patch = (JSON.parse(body) as { data?: Record<string, string | null> }).data ?? {};
        for (const [key, value] of Object.entries(patch)) {
          if (value === null) data.delete(key);
          else data.set(key, value);
        }
        if (swallow.next) {
          swallow.next = false;
          held.add(res);
          return;
        }
      }
      res.writeHead(200, { "content-type": "application/json" });
      const metadata = { name: POWER_RECORDS_CONFIGMAP, namespace: "plugpool", resourceVersion: "1" };
      res.end(JSON.stringify({ kind: "ConfigMap", apiVersion: "v1", metadata, data: Object.fromEntries(data) }));
    });
  });
}

describe("createKubernetesPowerRecords() when a write lands but its answer is lost", () => {
  let server: Server;
  const data = new Map<string, string>();
  const held = new Set<ServerResponse>();
  const swallow = { next: false };
  const kc = new KubeConfig();

  before(async () => {
    server = recordsServer(data, held, swallow);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
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

  it("fails the power-on, shows none, and takes the stored record back before stored() resolves", async () => {
    const options = { namespace: "plugpool", machines, writeTimeoutMs: 500, retry: { initialMs: 60_000, maxMs: 60_000 } };
    const records = createKubernetesPowerRecords(kc, options);
    await records.load();
    swallow.next = true;
    await assert.rejects(records.recordPowerOn("worker-1", { at: 3, why: "scale-up" }), (error: unknown) => {
      assert.ok(isPlugpoolError(error));
      assert.equal(error.code, "cluster-refused");
      assert.match(error.message, /timed out after 500 ms/);
      return true;
    });
    assert.equal(records.powerOn("worker-1"), undefined, "memory: not recorded");
    await records.stored("worker-1");
    assert.equal(data.get("power-on.worker-1"), undefined, "the store agrees");
    records.stop();
    const restarted = createKubernetesPowerRecords(kc, options);
    await restarted.load();
    assert.equal(restarted.powerOn("worker-1"), undefined);
    restarted.stop();
  });
});
