// plugpool's records of its power-ons and quarantines against a real kube-apiserver: kept in ConfigMap
// plugpool-records so that a restart finds them, written key by key at the resourceVersion memory is based on, and
// retried until they land; a second instance writing the same ConfigMap is seen, not overwritten.
import { ApiException, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, it } from "node:test";
import {
  createKubernetesPowerRecords,
  POWER_RECORDS_CONFIGMAP,
  recordKey,
  type KubernetesPowerRecords,
  type KubernetesPowerRecordsOptions,
} from "../../../src/adapters/kubernetes/power-records.ts";
import { isPlugpoolError } from "../../../src/domain/errors.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
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
    assert.ok(a.powerOn("worker-2") !== undefined || b.powerOn("worker-1") !== undefined, "the one created second took the other's key in");
  });

  /** Two loaded instances on the ConfigMap of namespace `ns`, each collecting the conflicts it reports. */
  const twoInstances = async (ns: string) => {
    await createNamespace(core, ns);
    const instance = async () => {
      const conflicts: string[][] = [];
      const records = await fresh({ namespace: ns, onConflict: (keys) => conflicts.push([...keys]) });
      return Object.assign(records, { conflicts });
    };
    return [await instance(), await instance()] as const;
  };

  it("two instances on one ConfigMap: each takes in what the other wrote, and loses none of its own", async () => {
    const [a, b] = await twoInstances("pair");
    await a.recordPowerOn("worker-1", { at: 1, why: "scale-up" });
    b.setQuarantine("worker-2", { until: 5, failures: 1 });
    await b.flushed();
    assert.deepEqual(b.conflicts, [["power-on.worker-1"]]);
    assert.deepEqual(b.powerOn("worker-1"), { at: 1, why: "scale-up" });
    await a.recordDeviceIdentity("worker-3", "name \"plug-3\"");
    assert.deepEqual(a.conflicts, [["quarantine.worker-2"]]);
    assert.deepEqual(a.quarantine("worker-2"), { until: 5, failures: 1 });
    b.endPowerOn("worker-1");
    await b.flushed();
    assert.deepEqual(b.conflicts, [["power-on.worker-1"], ["device.worker-3"]]);
    assert.equal(b.deviceIdentity("worker-3"), "name \"plug-3\"");
    a.setQuarantine("worker-3", { until: 6, failures: 1 });
    await a.flushed();
    assert.deepEqual(a.conflicts, [["quarantine.worker-2"], ["power-on.worker-1"]]);
    assert.equal(a.powerOn("worker-1"), undefined);
    const expected = { "quarantine.worker-2": { until: 5, failures: 1 }, "device.worker-3": { id: "name \"plug-3\"" }, "quarantine.worker-3": { until: 6, failures: 1 } };
    const data = await stored("pair");
    assert.deepEqual(Object.fromEntries(Object.entries(data).map(([key, json]) => [key, JSON.parse(json) as unknown])), expected);
    const restarted = await fresh({ namespace: "pair" });
    assert.deepEqual(restarted.quarantine("worker-3"), { until: 6, failures: 1 });
    assert.equal(restarted.deviceIdentity("worker-3"), "name \"plug-3\"");
  });

  it("a stale instance's write is refused by the apiserver, then lands at the new version; one of the same key fails", async () => {
    const [first] = await twoInstances("stale");
    await first.recordPowerOn("worker-1", { at: 1, why: "scale-up" });
    const [stale, other] = await twoInstances("stale");
    const readAt = (await core.readNamespacedConfigMap({ name: POWER_RECORDS_CONFIGMAP, namespace: "stale" })).metadata?.resourceVersion;
    await other.recordPowerOn("worker-2", { at: 2, why: "scale-up" });
    // What the stale instance's next patch meets: the apiserver refuses a write at the version it read.
    await assert.rejects(
      core.patchNamespacedConfigMap(
        { name: POWER_RECORDS_CONFIGMAP, namespace: "stale", body: { metadata: { resourceVersion: readAt }, data: { probe: "x" } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
      (error: unknown) => error instanceof ApiException && error.code === 409,
    );
    stale.setQuarantine("worker-3", { until: 7, failures: 1 });
    await stale.flushed();
    assert.deepEqual(stale.conflicts, [["power-on.worker-2"]], "reported: another instance wrote");
    assert.deepEqual(stale.powerOn("worker-2"), { at: 2, why: "scale-up" });
    assert.deepEqual(Object.keys(await stored("stale")).sort(), ["power-on.worker-1", "power-on.worker-2", "quarantine.worker-3"]);

    await other.recordPowerOn("worker-3", { at: 3, why: "queued" });
    await assert.rejects(stale.recordPowerOn("worker-3", { at: 4, why: "scale-up" }), (error: unknown) => {
      assert.ok(isPlugpoolError(error));
      assert.equal(error.code, "cluster-refused");
      assert.match(error.message, /another writer changed "power-on\.worker-3" meanwhile, and its value stands/);
      return true;
    });
    assert.deepEqual(stale.powerOn("worker-3"), { at: 3, why: "queued" }, "the other's record, taken in");
    await stale.stored("worker-3");
    assert.deepEqual(JSON.parse((await stored("stale"))["power-on.worker-3"] ?? "null"), { at: 3, why: "queued" });
  });

  it("creates the ConfigMap anew after it was deleted, and forgets the records deleted with it", async () => {
    const [records] = await twoInstances("deleted");
    await records.recordPowerOn("worker-1", { at: 1, why: "scale-up" });
    await core.deleteNamespacedConfigMap({ name: POWER_RECORDS_CONFIGMAP, namespace: "deleted" });
    await records.recordPowerOn("worker-2", { at: 2, why: "scale-up" });
    assert.deepEqual(records.conflicts, [["power-on.worker-1"]]);
    assert.equal(records.powerOn("worker-1"), undefined);
    assert.deepEqual(Object.keys(await stored("deleted")), ["power-on.worker-2"]);
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
 * One ConfigMap plugpool-records, kept as kube-apiserver keeps it for plugpool's requests: read, create (409
 * AlreadyExists when it exists), JSON merge patch (404 when it does not exist); every write that changes it moves
 * its resourceVersion on, and a patch carrying a resourceVersion other than the current one is refused with 409
 * Conflict and changes nothing. It can also apply a patch and never answer it: a write that landed, whose answer
 * the client never gets.
 */
class FakeRecordsApiserver {
  exists = true;
  resourceVersion = 1;
  readonly data = new Map<string, string>();
  /** Patches refused for their resourceVersion. */
  refused = 0;
  /** Patches received. */
  patches = 0;
  /** The keys each patch received set to a value (not removals), in order. */
  readonly setKeys: string[] = [];
  swallowNext = false;
  readonly #held = new Set<ServerResponse>();
  #hold: { readonly arrived: () => void; readonly released: Promise<void> } | undefined;
  readonly #server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => { body += chunk.toString(); });
    req.on("end", () => {
      const hold = req.method === "PATCH" ? this.#hold : undefined;
      if (hold === undefined) {
        this.#answer(req, res, body);
        return;
      }
      this.#hold = undefined;
      hold.arrived();
      void hold.released.then(() => { this.#answer(req, res, body); });
    });
  });

  /** Holds the next patch, not yet judged, until `release()`; `arrived` resolves when it comes. */
  holdNextPatch(): { arrived: Promise<void>; release: () => void } {
    const arrived = Promise.withResolvers<undefined>();
    const released = Promise.withResolvers<undefined>();
    this.#hold = { arrived: () => { arrived.resolve(undefined); }, released: released.promise.then(() => undefined) };
    return { arrived: arrived.promise.then(() => undefined), release: () => { released.resolve(undefined); } };
  }

  async start(): Promise<KubeConfig> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    return kc;
  }

  async stop(): Promise<void> {
    for (const res of this.#held) res.destroy();
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  reset(): void {
    this.exists = true;
    this.resourceVersion += 1;
    this.data.clear();
    this.refused = 0;
    this.patches = 0;
    this.setKeys.length = 0;
  }

  #answer(req: IncomingMessage, res: ServerResponse, body: string): void {
    const answer = this.#handle(req.method ?? "", body === "" ? {} : (JSON.parse(body) as Sent));
    if (answer === "held") {
      this.#held.add(res);
      return;
    }
    res.writeHead(answer.code, { "content-type": "application/json" });
    res.end(JSON.stringify(answer.body));
  }

  #handle(method: string, sent: Sent): { code: number; body: unknown } | "held" {
    if (method === "GET") return this.exists ? this.#configMap() : status(404, "NotFound");
    if (method === "POST") {
      if (this.exists) return status(409, "AlreadyExists");
      this.exists = true;
      this.data.clear();
      for (const [key, value] of Object.entries(sent.data ?? {})) if (value !== null) this.data.set(key, value);
      this.resourceVersion += 1;
      return { ...this.#configMap(), code: 201 };
    }
    if (method !== "PATCH") return status(405, "MethodNotAllowed");
    this.patches += 1;
    for (const [key, value] of Object.entries(sent.data ?? {})) if (value !== null) this.setKeys.push(key);
    if (!this.exists) return status(404, "NotFound");
    const precondition = sent.metadata?.resourceVersion;
    if (precondition !== undefined && precondition !== String(this.resourceVersion)) {
      this.refused += 1;
      return status(409, "Conflict");
    }
    const before = JSON.stringify([...this.data]);
    for (const [key, value] of Object.entries(sent.data ?? {})) {
      if (value === null) this.data.delete(key);
      else this.data.set(key, value);
    }
    // As the apiserver: a patch that changes nothing is not a write.
    if (JSON.stringify([...this.data]) !== before) this.resourceVersion += 1;
    if (this.swallowNext) {
      this.swallowNext = false;
      return "held";
    }
    return this.#configMap();
  }

  #configMap(): { code: number; body: unknown } {
    const metadata = { name: POWER_RECORDS_CONFIGMAP, namespace: "plugpool", resourceVersion: String(this.resourceVersion) };
    return { code: 200, body: { kind: "ConfigMap", apiVersion: "v1", metadata, data: Object.fromEntries(this.data) } };
  }
}

interface Sent {
  readonly metadata?: { readonly resourceVersion?: string };
  readonly data?: Readonly<Record<string, string | null>>;
}

function status(code: number, reason: string): { code: number; body: unknown } {
  return { code, body: { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", reason, code, message: `fake apiserver: ${reason}` } };
}

describe("createKubernetesPowerRecords() against an apiserver that checks resourceVersions", () => {
  const apiserver = new FakeRecordsApiserver();
  let kc: KubeConfig;
  const started: KubernetesPowerRecords[] = [];

  /** A loaded store; its conflicts are collected in `conflicts`. */
  const store = async (options: Partial<KubernetesPowerRecordsOptions> = {}) => {
    const conflicts: string[][] = [];
    const records = createKubernetesPowerRecords(kc, {
      namespace: "plugpool",
      machines,
      retry: fastRetry,
      onConflict: (keys) => conflicts.push([...keys]),
      ...options,
    });
    started.push(records);
    await records.load();
    return Object.assign(records, { conflicts });
  };
  const storedJson = (key: string): unknown => JSON.parse(apiserver.data.get(key) ?? "null");

  before(async () => {
    kc = await apiserver.start();
  });
  beforeEach(() => {
    apiserver.reset();
  });
  after(async () => {
    for (const records of started) records.stop();
    await apiserver.stop();
  });

  it("refuses a patch at a resourceVersion that has moved on, as the apiserver does", async () => {
    const core = kc.makeApiClient(CoreV1Api);
    const read = await core.readNamespacedConfigMap({ name: POWER_RECORDS_CONFIGMAP, namespace: "plugpool" });
    const at = read.metadata?.resourceVersion ?? "";
    const patch = (data: Record<string, string>) =>
      core.patchNamespacedConfigMap(
        { name: POWER_RECORDS_CONFIGMAP, namespace: "plugpool", body: { metadata: { resourceVersion: at }, data } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    await patch({ a: "1" });
    await assert.rejects(patch({ b: "2" }), (error: unknown) => error instanceof ApiException && error.code === 409);
    assert.deepEqual([...apiserver.data.keys()], ["a"]);
  });

  it("takes in a record another store wrote, and lands its own write at the new version", async () => {
    const a = await store();
    const b = await store();
    await a.recordPowerOn("worker-1", { at: 1, why: "scale-up" });
    b.setQuarantine("worker-2", { until: 5, failures: 1 });
    await b.flushed();
    assert.equal(apiserver.refused, 1, "b's first patch was at the version before a's write");
    assert.deepEqual(b.conflicts, [["power-on.worker-1"]]);
    assert.deepEqual(b.powerOn("worker-1"), { at: 1, why: "scale-up" }, "b took a's record in");
    assert.deepEqual(storedJson("power-on.worker-1"), { at: 1, why: "scale-up" });
    assert.deepEqual(storedJson("quarantine.worker-2"), { until: 5, failures: 1 });
    await a.recordDeviceIdentity("worker-3", "name \"plug-3\"");
    assert.deepEqual(a.conflicts, [["quarantine.worker-2"]]);
    assert.deepEqual(a.quarantine("worker-2"), { until: 5, failures: 1 });
    assert.equal(a.deviceIdentity("worker-3"), "name \"plug-3\"");
  });

  it("fails a power-on record of a key another store changed meanwhile, and keeps the other's value", async () => {
    const a = await store();
    const b = await store();
    await a.recordPowerOn("worker-1", { at: 1, why: "scale-up" });
    await assert.rejects(b.recordPowerOn("worker-1", { at: 2, why: "queued" }), (error: unknown) => {
      assert.ok(isPlugpoolError(error));
      assert.equal(error.code, "cluster-refused");
      assert.match(error.message, /another writer changed "power-on\.worker-1" meanwhile/);
      return true;
    });
    assert.deepEqual(b.powerOn("worker-1"), { at: 1, why: "scale-up" });
    await b.stored("worker-1");
    assert.deepEqual(storedJson("power-on.worker-1"), { at: 1, why: "scale-up" });
    assert.deepEqual(b.conflicts, [["power-on.worker-1"]]);
  });

  it("drops a background write of a key another store changed meanwhile, and shows the other's value", async () => {
    const a = await store();
    await a.recordPowerOn("worker-2", { at: 3, why: "scale-up" });
    const b = await store();
    a.endPowerOn("worker-2");
    a.setQuarantine("worker-2", { until: 9, failures: 2 });
    await a.flushed();
    b.setQuarantine("worker-2", { until: 7, failures: 1 });
    b.setQuarantine("worker-3", { until: 8, failures: 1 });
    await b.flushed();
    assert.deepEqual(b.conflicts, [["power-on.worker-2", "quarantine.worker-2"]]);
    assert.equal(b.powerOn("worker-2"), undefined);
    assert.deepEqual(b.quarantine("worker-2"), { until: 9, failures: 2 });
    assert.deepEqual(storedJson("quarantine.worker-2"), { until: 9, failures: 2 });
    assert.deepEqual(storedJson("quarantine.worker-3"), { until: 8, failures: 1 }, "the key a left alone is written");
  });

  it("drops a change made while its write was in flight to a key another store changed, and writes one made after", async () => {
    const a = await store();
    const b = await store();
    a.setQuarantine("worker-2", { until: 10, failures: 1 });
    await a.flushed();
    const held = apiserver.holdNextPatch();
    b.setQuarantine("worker-3", { until: 11, failures: 1 });
    await held.arrived;
    // Made on b's view from before a's write: a's value of the key stands.
    b.setQuarantine("worker-2", { until: 12, failures: 1 });
    held.release();
    await b.flushed();
    assert.deepEqual(b.quarantine("worker-2"), { until: 10, failures: 1 });
    assert.deepEqual(storedJson("quarantine.worker-2"), { until: 10, failures: 1 });
    // Made once b knows a's value: b's own.
    b.setQuarantine("worker-2", { until: 13, failures: 2 });
    await b.flushed();
    assert.deepEqual(b.conflicts, [["quarantine.worker-2"]]);
    assert.deepEqual(storedJson("quarantine.worker-2"), { until: 13, failures: 2 });
    assert.deepEqual(storedJson("quarantine.worker-3"), { until: 11, failures: 1 });
    assert.deepEqual(b.quarantine("worker-2"), { until: 13, failures: 2 });
  });

  it("creates the ConfigMap anew when it was deleted, forgetting the records deleted with it", async () => {
    const a = await store();
    await a.recordPowerOn("worker-1", { at: 4, why: "scale-up" });
    apiserver.exists = false;
    apiserver.data.clear();
    a.setQuarantine("worker-3", { until: 6, failures: 1 });
    await a.flushed();
    assert.deepEqual(a.conflicts, [["power-on.worker-1"]]);
    assert.equal(a.powerOn("worker-1"), undefined);
    assert.deepEqual([...apiserver.data.keys()], ["quarantine.worker-3"]);
  });

  it("patches the ConfigMap another store created first, at its version", async () => {
    apiserver.exists = false;
    const a = await store();
    const b = await store();
    await a.recordPowerOn("worker-1", { at: 1, why: "scale-up" });
    await b.recordPowerOn("worker-2", { at: 2, why: "scale-up" });
    assert.deepEqual(b.conflicts, [["power-on.worker-1"]]);
    assert.deepEqual([...apiserver.data.keys()].sort(), ["power-on.worker-1", "power-on.worker-2"]);
  });

  it("writes what many callers ask while one write is in flight in one request after it: first contact with a site's devices", async () => {
    const records = await store();
    const held = apiserver.holdNextPatch();
    const first = records.recordDeviceIdentity("worker-1", "plug-1");
    await held.arrived;
    // Each with its own short deadline, as a device call gives it: one request each would queue past it.
    const rest = ["worker-2", "worker-3", longName].map((name, i) =>
      records.recordDeviceIdentity(name, `plug-${i + 2}`, { signal: AbortSignal.timeout(5_000) }));
    held.release();
    await Promise.all([first, ...rest]);
    assert.equal(apiserver.patches, 2, "the held write, then one for the three that waited");
    assert.deepEqual([1, 2, 3, 4].map((n) => records.deviceIdentity(machines[n - 1]?.name ?? "")), ["plug-1", "plug-2", "plug-3", "plug-4"]);
    assert.deepEqual(storedJson(recordKey("device", longName)), { id: "plug-4" });
    assert.deepEqual(storedJson("device.worker-2"), { id: "plug-2" });
  });

  it("leaves out of a shared write the keys of a caller that gave up while waiting, and lands the others'", async () => {
    const records = await store();
    const held = apiserver.holdNextPatch();
    const first = records.recordPowerOn("worker-1", { at: 1, why: "scale-up" });
    await held.arrived;
    const giveUp = new AbortController();
    const leaving = records.recordPowerOn("worker-2", { at: 2, why: "scale-up" }, { signal: giveUp.signal });
    const staying = records.recordPowerOn("worker-3", { at: 3, why: "scale-up" });
    giveUp.abort(new Error("the RPC's deadline"));
    await assert.rejects(leaving, (error: unknown) => isPlugpoolError(error) && error.code === "cancelled");
    held.release();
    await Promise.all([first, staying]);
    await records.stored("worker-2");
    assert.ok(!apiserver.setKeys.includes("power-on.worker-2"), "never sent");
    assert.equal(apiserver.data.get("power-on.worker-2"), undefined);
    assert.equal(records.powerOn("worker-2"), undefined);
    assert.deepEqual(storedJson("power-on.worker-3"), { at: 3, why: "scale-up" });
  });

  it("fails a power-on whose answer is lost, shows none, and takes the stored record back before stored() resolves", async () => {
    const options = { writeTimeoutMs: 500, retry: { initialMs: 60_000, maxMs: 60_000 } };
    const records = await store(options);
    apiserver.swallowNext = true;
    await assert.rejects(records.recordPowerOn("worker-1", { at: 3, why: "scale-up" }), (error: unknown) => {
      assert.ok(isPlugpoolError(error));
      assert.equal(error.code, "cluster-refused");
      assert.match(error.message, /timed out after 500 ms/);
      return true;
    });
    assert.equal(records.powerOn("worker-1"), undefined, "memory: not recorded");
    await records.stored("worker-1");
    assert.equal(apiserver.data.get("power-on.worker-1"), undefined, "the store agrees");
    assert.equal(apiserver.refused, 1, "the undo was first sent at the version before the write that landed");
    assert.deepEqual(records.conflicts, [], "a write of its own that landed unanswered is no other writer's");
    const restarted = await store(options);
    assert.equal(restarted.powerOn("worker-1"), undefined);
  });
});
