// deploy/examples against a real kube-apiserver and plugpool's own config loader: every object is accepted
// (server-side apply, dry run), the pieces fit together (mounts, ports, names, the Secret's keys), and both
// containers pass Pod Security "restricted".
import { esphomePlugs } from "../app/fixtures/config-builders.ts";
import { readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  ApiException, CoreV1Api, KubernetesObjectApi, PatchStrategy,
  type KubeConfig, type KubernetesObject, type V1ConfigMap, type V1Container, type V1Deployment, type V1Pod, type V1Secret, type V1Volume,
} from "@kubernetes/client-node";
import { parse, parseAllDocuments } from "yaml";
import { loadConfig, type AppConfig } from "../../src/app/config/index.ts";
import { parseDuration } from "../../src/app/config/duration.ts";
import { startControlPlane, type ControlPlane } from "../harness/control-plane/index.ts";

const examples = join(import.meta.dirname, "..", "..", "deploy", "examples");

interface Manifest {
  readonly file: string;
  readonly object: KubernetesObject;
}

const kustomization = parse(readFileSync(join(examples, "kustomization.yaml"), "utf8")) as { resources?: string[] };
const manifests: Manifest[] = (kustomization.resources ?? []).flatMap((file) =>
  parseAllDocuments(readFileSync(join(examples, file), "utf8")).map((document) => ({ file, object: document.toJS() as KubernetesObject })),
);

function only(kind: string, name: string): KubernetesObject {
  const found = manifests.filter((m) => m.object.kind === kind && m.object.metadata?.name === name);
  assert.equal(found.length, 1, `exactly one ${kind} ${name} in the kustomization`);
  return found[0]?.object ?? {};
}

const deployment = only("Deployment", "cluster-autoscaler") as V1Deployment;
const podSpec = deployment.spec?.template.spec;
const container = (name: string): V1Container => {
  const found = podSpec?.containers.find((c) => c.name === name);
  assert.ok(found, `container ${name}`);
  return found;
};
const secret = only("Secret", "plug-credentials") as V1Secret;
const pluginConfigMap = only("ConfigMap", "plugpool-config") as V1ConfigMap;

/** The ConfigMap key a container sees at `path` through its volume mounts (whole-ConfigMap mounts only). */
function configMapFileAt(c: V1Container, volumes: readonly V1Volume[], path: string): { configMap: string; key: string } | undefined {
  const mount = c.volumeMounts?.find((m) => m.mountPath === dirname(path));
  const volume = volumes.find((v) => v.name === mount?.name);
  if (volume?.configMap === undefined || volume.configMap.items !== undefined) return undefined;
  return { configMap: volume.configMap.name ?? "", key: basename(path) };
}

function dataOf(name: string, key: string): string {
  const text = (only("ConfigMap", name) as V1ConfigMap).data?.[key];
  assert.ok(text !== undefined, `ConfigMap ${name} has key ${key}`);
  return text;
}

function flagValue(c: V1Container, flag: string): string | undefined {
  const prefix = `--${flag}=`;
  return c.args?.find((a) => a.startsWith(prefix))?.slice(prefix.length);
}

function pluginConfig(): AppConfig {
  const path = container("plugpool").args?.at(-1) ?? "";
  return loadConfig(dataOf("plugpool-config", basename(path)), secret.stringData ?? {});
}

describe("deploy/examples", () => {
  let plane: ControlPlane;
  let admin: KubeConfig;
  let core: CoreV1Api;

  before(async () => {
    plane = await startControlPlane();
    admin = plane.admin();
    core = admin.makeApiClient(CoreV1Api);
    // For real, so that the namespaced objects' dry runs find their namespace.
    await core.createNamespace({ body: only("Namespace", "plugpool") });
  });
  after(async () => {
    await plane.stop();
  });

  it("lists every manifest of the folder in its kustomization, each once", () => {
    const files = readdirSync(examples).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml").sort();
    assert.deepEqual([...(kustomization.resources ?? [])].sort(), files);
  });

  for (const { file, object } of manifests) {
    it(`has the apiserver accept ${object.kind ?? ""} ${object.metadata?.name ?? ""} from ${file} (server-side apply, dry run)`, async () => {
      const client = KubernetesObjectApi.makeApiClient(admin);
      const applied = await client.patch(object, undefined, "All", "plugpool-examples", true, PatchStrategy.ServerSideApply);
      assert.equal(applied.metadata?.name, object.metadata?.name);
    });
  }

  it("holds a plugpool configuration that the loader accepts, with the Secret's variables", () => {
    const config = pluginConfig();
    assert.deepEqual(config.pool.groups.map((g) => [g.id, g.machines.length]), [["gpu", 2], ["workers", 3]]);
    assert.ok(esphomePlugs(config).every((plug) => plug.credentials?.from === "environment"));
    assert.ok(config.pool.groups.some((g) => g.machines.some((m) => m.power.measuresWatts)));
  });

  it("mounts plugpool's --config file from the ConfigMap key that holds it", () => {
    const args = container("plugpool").args ?? [];
    assert.deepEqual(args.slice(0, 2), ["serve", "--config"]);
    const file = configMapFileAt(container("plugpool"), podSpec?.volumes ?? [], args[2] ?? "");
    assert.deepEqual(file, { configMap: "plugpool-config", key: "config.yaml" });
    assert.ok(pluginConfigMap.data?.["config.yaml"] !== undefined);
  });

  it("mounts cluster-autoscaler's --cloud-config file and points it at plugpool's listen address", () => {
    const ca = container("cluster-autoscaler");
    assert.equal(flagValue(ca, "cloud-provider"), "externalgrpc");
    const file = configMapFileAt(ca, podSpec?.volumes ?? [], flagValue(ca, "cloud-config") ?? "");
    assert.ok(file !== undefined, "--cloud-config is a mounted ConfigMap key");
    const cloudConfig = parse(dataOf(file.configMap, file.key)) as { address?: string; grpc_timeout?: string };
    const { listen } = pluginConfig();
    assert.equal(cloudConfig.address, `${listen.host}:${listen.port}`);
    // Above cluster-autoscaler's 5 s default, and room for several timeouts of the plugs the example uses.
    const timeoutMs = parseDuration(cloudConfig.grpc_timeout ?? "");
    assert.ok(timeoutMs !== undefined && timeoutMs > 5_000 && timeoutMs >= 3 * (pluginConfig().deviceTimeoutsMs.get("esphome") ?? Infinity));
  });

  it("probes plugpool on its ops port, at the configured opsListen port", () => {
    const plugpool = container("plugpool");
    const ops = plugpool.ports?.find((p) => p.name === "ops");
    assert.equal(ops?.containerPort, pluginConfig().opsListen.port);
    assert.deepEqual([plugpool.livenessProbe?.httpGet?.path, plugpool.livenessProbe?.httpGet?.port], ["/healthz", "ops"]);
    assert.deepEqual([plugpool.readinessProbe?.httpGet?.path, plugpool.readinessProbe?.httpGet?.port], ["/readyz", "ops"]);
  });

  it("gives plugpool both credential variables from keys of the Secret", () => {
    const env = container("plugpool").env ?? [];
    for (const name of ["PLUGPOOL_PLUG_USERNAME", "PLUGPOOL_PLUG_PASSWORD"]) {
      const ref = env.find((e) => e.name === name)?.valueFrom?.secretKeyRef;
      assert.equal(ref?.name, "plug-credentials", name);
      assert.ok(ref.key in (secret.stringData ?? {}), `${name} from key ${ref.key}`);
    }
  });

  it("runs as the ServiceAccount rbac.yaml grants, with cluster-autoscaler's namespace and power-off pods where its Roles are", () => {
    const sa = only("ServiceAccount", "cluster-autoscaler");
    assert.equal(podSpec?.serviceAccountName, sa.metadata?.name);
    assert.equal(deployment.metadata?.namespace, sa.metadata?.namespace);
    const roleNamespaces = manifests.filter((m) => m.object.kind === "Role").map((m) => m.object.metadata?.namespace);
    assert.deepEqual([...new Set(roleNamespaces)], ["plugpool"]);
    assert.equal(flagValue(container("cluster-autoscaler"), "namespace"), "plugpool");
    assert.equal(pluginConfig().powerOffPod.namespace, "plugpool");
    const namespace = only("Namespace", "plugpool");
    assert.equal(namespace.metadata?.labels?.["pod-security.kubernetes.io/enforce"], "privileged");
  });

  it("keeps a single replica, replaced by Recreate, without leader election", () => {
    assert.equal(deployment.spec?.replicas, 1);
    assert.equal(deployment.spec.strategy?.type, "Recreate");
    assert.equal(flagValue(container("cluster-autoscaler"), "leader-elect"), "false");
  });

  describe("Pod Security", () => {
    const namespace = "restricted-check";
    const asPod = (spec = podSpec): V1Pod => ({
      apiVersion: "v1", kind: "Pod", metadata: { name: "example", namespace, labels: deployment.spec?.template.metadata?.labels ?? {} }, ...(spec && { spec }),
    });

    before(async () => {
      await core.createNamespace({
        body: { metadata: { name: namespace, labels: { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest" } } },
      });
      await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: podSpec?.serviceAccountName ?? "default" } } });
    });

    it("admits the Deployment's pod in a namespace that enforces restricted (dry run)", async () => {
      const created = await core.createNamespacedPod({ namespace, body: asPod(), dryRun: "All" });
      assert.deepEqual(created.spec?.containers.map((c) => c.name), ["cluster-autoscaler", "plugpool"]);
    });

    it("refuses the pod there once a container may escalate privileges, so the check above means something", async () => {
      const spec = structuredClone(podSpec);
      const plugpool = spec?.containers.find((c) => c.name === "plugpool");
      if (plugpool?.securityContext) delete plugpool.securityContext.allowPrivilegeEscalation;
      await assert.rejects(core.createNamespacedPod({ namespace, body: asPod(spec), dryRun: "All" }), (error: unknown) =>
        error instanceof ApiException && (error as ApiException<string>).code === 403 && (error as ApiException<string>).body.includes("allowPrivilegeEscalation"));
    });

    it("sets a read-only root filesystem for both containers", () => {
      for (const c of podSpec?.containers ?? []) assert.equal(c.securityContext?.readOnlyRootFilesystem, true, c.name);
    });
  });
});
