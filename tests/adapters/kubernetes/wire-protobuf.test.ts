// Cross-check of the hand-kept protobuf subset (gen/) against a real kube-apiserver: objects created from
// JSON and read back as Kubernetes protobuf decode to the same values, and a template Node encoded by
// plugpool is accepted by the apiserver as a protobuf create (dry run) with the same contents.
import { fromBinary } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { CoreV1Api, ResourceV1Api, type KubeConfig } from "@kubernetes/client-node";
import assert from "node:assert/strict";
import { request, type RequestOptions } from "node:https";
import { after, before, describe, it } from "node:test";
import { NodeSchema } from "../../../gen/k8s.io/api/core/v1/generated_pb.ts";
import { ResourceSliceSchema } from "../../../gen/k8s.io/api/resource/v1/generated_pb.ts";
import { encodeTemplateNode } from "../../../src/adapters/grpc/k8s-encoding.ts";
import type { TemplateNode } from "../../../src/domain/model.ts";
import { startControlPlane, type ControlPlane } from "../../harness/control-plane/index.ts";
import { nodeBody } from "./support.ts";

const protobuf = "application/vnd.kubernetes.protobuf";
const magic = Uint8Array.of(0x6b, 0x38, 0x73, 0x00);

/** One HTTPS request with the identity of `kc`; resolves with the status and the body's bytes. */
async function call(kc: KubeConfig, method: string, path: string, headers: Record<string, string>, body?: Uint8Array) {
  const url = new URL(path, kc.getCurrentCluster()?.server);
  const options: RequestOptions = { method, headers };
  await kc.applyToHTTPSOptions(options);
  return new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
    const req = request(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => { resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }); });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** The `raw` bytes of a `k8s\0`-prefixed runtime.Unknown (field 1 typeMeta, field 2 raw). */
function unwrap(envelope: Uint8Array): { apiVersion: string; kind: string; raw: Uint8Array } {
  assert.deepEqual([...envelope.subarray(0, 4)], [...magic], "the Kubernetes protobuf magic");
  const reader = new BinaryReader(envelope.subarray(4));
  const out: { apiVersion: string; kind: string; raw: Uint8Array } = { apiVersion: "", kind: "", raw: new Uint8Array() };
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1) {
      const typeMeta = new BinaryReader(reader.bytes());
      while (typeMeta.pos < typeMeta.len) {
        const [f, t] = typeMeta.tag();
        if (f === 1) out.apiVersion = typeMeta.string();
        else if (f === 2) out.kind = typeMeta.string();
        else typeMeta.skip(t);
      }
    } else if (field === 2) out.raw = reader.bytes();
    else reader.skip(wireType);
  }
  return out;
}

function wrap(apiVersion: string, kind: string, raw: Uint8Array): Uint8Array {
  const unknown = new BinaryWriter()
    .tag(1, WireType.LengthDelimited).fork()
    .tag(1, WireType.LengthDelimited).string(apiVersion)
    .tag(2, WireType.LengthDelimited).string(kind)
    .join()
    .tag(2, WireType.LengthDelimited).bytes(raw)
    .finish();
  return Uint8Array.from([...magic, ...unknown]);
}

const quantities = (map: Record<string, { string: string }>): Record<string, string> =>
  Object.fromEntries(Object.entries(map).map(([k, q]) => [k, q.string]));

describe("Kubernetes protobuf subset against the apiserver", () => {
  let plane: ControlPlane;
  let admin: KubeConfig;

  before(async () => {
    plane = await startControlPlane();
    admin = plane.admin();
  });
  after(async () => {
    await plane.stop();
  });

  it("decodes a Node read as protobuf to the values it shows as JSON", async () => {
    const body = nodeBody({
      name: "gpu-1",
      providerID: "k3s://gpu-1",
      readySince: "2026-02-03T04:05:06Z",
      labels: { "example.com/pool": "gpu", "kubernetes.io/os": "linux" },
      taints: [{ key: "example.com/gpu", value: "true", effect: "NoSchedule" }],
      capacity: { cpu: "24", memory: "64Gi", pods: "110" },
      allocatable: { cpu: "23500m", memory: "62Gi", pods: "110" },
    });
    await admin.makeApiClient(CoreV1Api).createNode({ body });

    const json = JSON.parse((await call(admin, "GET", "/api/v1/nodes/gpu-1", { Accept: "application/json" })).body.toString()) as {
      metadata: { name: string; labels: Record<string, string> };
      spec: { providerID: string; taints: { key: string; value?: string; effect: string }[] };
      status: { capacity: Record<string, string>; allocatable: Record<string, string>; conditions: { type: string; status: string; reason: string; lastTransitionTime: string }[] };
    };
    const answer = await call(admin, "GET", "/api/v1/nodes/gpu-1", { Accept: protobuf });
    assert.equal(answer.status, 200);
    const { apiVersion, kind, raw } = unwrap(answer.body);
    assert.deepEqual([apiVersion, kind], ["v1", "Node"]);
    const node = fromBinary(NodeSchema, raw);

    assert.equal(node.metadata?.name, json.metadata.name);
    assert.deepEqual(node.metadata.labels, json.metadata.labels);
    assert.equal(node.spec?.providerID, json.spec.providerID);
    assert.deepEqual(node.spec.taints.map((t) => ({ key: t.key, value: t.value, effect: t.effect })),
      json.spec.taints.map((t) => ({ key: t.key, value: t.value ?? "", effect: t.effect })));
    const status = node.status;
    assert.deepEqual(quantities(status?.capacity ?? {}), json.status.capacity);
    assert.deepEqual(quantities(status?.allocatable ?? {}), json.status.allocatable);
    assert.deepEqual(
      (status?.conditions ?? []).map((c) => ({ type: c.type, status: c.status, reason: c.reason, at: Number(c.lastTransitionTime?.seconds) * 1000 })),
      json.status.conditions.map((c) => ({ type: c.type, status: c.status, reason: c.reason, at: Date.parse(c.lastTransitionTime) })),
    );
  });

  it("decodes a ResourceSlice read as protobuf to the values it shows as JSON", async () => {
    await admin.makeApiClient(ResourceV1Api).createResourceSlice({
      body: {
        metadata: { name: "gpu-1-slice" },
        spec: {
          driver: "gpu.example.com",
          nodeName: "gpu-1",
          pool: { name: "gpu-1", generation: 3, resourceSliceCount: 1 },
          devices: [{
            name: "gpu-0",
            attributes: { model: { string: "L4" }, index: { _int: 7 }, mig: { bool: false }, driverVersion: { version: "570.1.0" } },
            capacity: { memory: { value: "24Gi" } },
          }],
        },
      },
    });
    const path = "/apis/resource.k8s.io/v1/resourceslices/gpu-1-slice";
    const json = JSON.parse((await call(admin, "GET", path, { Accept: "application/json" })).body.toString()) as {
      spec: {
        driver: string; nodeName: string; pool: { name: string; generation: number; resourceSliceCount: number };
        devices: { name: string; attributes: Record<string, Record<string, unknown>>; capacity: Record<string, { value: string }> }[];
      };
    };
    const { kind, raw } = unwrap((await call(admin, "GET", path, { Accept: protobuf })).body);
    assert.equal(kind, "ResourceSlice");
    const slice = fromBinary(ResourceSliceSchema, raw);

    assert.equal(slice.spec?.driver, json.spec.driver);
    assert.equal(slice.spec.nodeName, json.spec.nodeName);
    assert.deepEqual(
      { name: slice.spec.pool?.name, generation: Number(slice.spec.pool?.generation), count: Number(slice.spec.pool?.resourceSliceCount) },
      { name: json.spec.pool.name, generation: json.spec.pool.generation, count: json.spec.pool.resourceSliceCount },
    );
    const decoded = slice.spec.devices.map((d) => ({
      name: d.name,
      attributes: Object.fromEntries(Object.entries(d.attributes).map(([k, a]) => [k,
        a.int !== BigInt(0) ? { int: Number(a.int) } : a.string !== "" ? { string: a.string } : a.version !== "" ? { version: a.version } : { bool: a.bool }])),
      capacity: Object.fromEntries(Object.entries(d.capacity).map(([k, c]) => [k, { value: c.value?.string }])),
    }));
    assert.deepEqual(decoded, json.spec.devices.map((d) => ({ name: d.name, attributes: d.attributes, capacity: d.capacity })));
  });

  it("has a template Node encoded by plugpool accepted as a protobuf create, with the same contents", async () => {
    const template: TemplateNode = {
      name: "template-workers",
      labels: { "example.com/pool": "workers", "kubernetes.io/os": "linux" },
      capacity: { cpu: "24", memory: "64Gi", pods: "110" },
      allocatable: { cpu: "24", memory: "64Gi", pods: "110" },
      taints: [{ key: "example.com/dedicated", value: "batch", effect: "NoExecute" }],
      conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }, { type: "MemoryPressure", status: "False", reason: "KubeletHasSufficientMemory" }],
    };
    const envelope = wrap("v1", "Node", encodeTemplateNode(template, Date.parse("2026-05-01T00:00:00Z")));
    const answer = await call(admin, "POST", "/api/v1/nodes?dryRun=All",
      { "Content-Type": protobuf, Accept: "application/json", "Content-Length": String(envelope.length) }, envelope);
    assert.equal(answer.status, 201, answer.body.toString());
    const created = JSON.parse(answer.body.toString()) as {
      metadata: { name: string; labels: Record<string, string> };
      spec: { taints: { key: string; value: string; effect: string }[] };
      status: { capacity: Record<string, string>; allocatable: Record<string, string> };
    };
    assert.equal(created.metadata.name, template.name);
    assert.deepEqual(created.metadata.labels, template.labels);
    assert.deepEqual(created.status.capacity, template.capacity);
    assert.deepEqual(created.status.allocatable, template.allocatable);
    assert.deepEqual(created.spec.taints.filter((t) => t.key.startsWith("example.com/")), template.taints);
    // Dry run: nothing was stored.
    assert.equal((await call(admin, "GET", "/api/v1/nodes/template-workers", { Accept: "application/json" })).status, 404);
  });
});
