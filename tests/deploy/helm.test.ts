// deploy/helm/values.yaml with the official cluster-autoscaler chart, rendered by the real helm as `helm
// install` would: the pod spec holds what keeps plugpool safe (two replicas of which one acts, plugpool as a native
// sidecar with its probes, cluster-autoscaler on externalgrpc with the cloud-config), the real
// cluster-autoscaler accepts every flag, and on a real kube-apiserver `helm install` succeeds, the
// ServiceAccount may do everything plugpool requires, and plugpool's power-off pod is admitted where it runs.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  ApiException, AuthorizationV1Api, CoreV1Api, KubernetesObjectApi,
  type KubeConfig, type KubernetesObject, type V1ConfigMap, type V1PodDisruptionBudget, type V1Container, type V1Deployment, type V1Namespace, type V1Pod, type V1Role, type V1Secret, type V1Volume,
} from "@kubernetes/client-node";
import { parse, parseAllDocuments } from "yaml";
import { requiredAccess } from "../../src/adapters/kubernetes/access.ts";
import { powerOffPodManifest } from "../../src/adapters/kubernetes/power-off-pod.ts";
import { loadConfig, type AppConfig } from "../../src/app/config/index.ts";
import { autoscalerBinaryPath, autoscalerMissing, autoscalerNotBuilt } from "../harness/autoscaler/autoscaler.ts";
import { startControlPlane, type ControlPlane } from "../harness/control-plane/index.ts";
import { chartArchive, chartMissing, helm, helmTemplate } from "../harness/helm/helm.ts";
import { exampleManifest } from "../adapters/kubernetes/support.ts";

const root = join(import.meta.dirname, "..", "..");
const valuesFile = join(root, "deploy", "helm", "values.yaml");
const release = "cluster-autoscaler";
const namespace = "plugpool";
/** The Kubernetes version of the control plane the tests run, as helm's .Capabilities.KubeVersion. */
const kubeVersion = /^\s*k8s\.io\/kubernetes (v\S+)$/m.exec(readFileSync(join(root, "tests", "harness", "control-plane", "go.mod"), "utf8"))?.[1] ?? "";

describe("deploy/helm/values.yaml with the cluster-autoscaler chart", { skip: chartMissing() }, () => {
  let objects: KubernetesObject[] = [];
  let plane: ControlPlane | undefined;
  let admin: KubeConfig;

  const only = (kind: string, name?: string): KubernetesObject => {
    const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
    assert.equal(found.length, 1, `exactly one ${kind}${name === undefined ? "" : ` ${name}`} rendered, found ${found.length}`);
    return found[0] ?? {};
  };
  const deployment = (): V1Deployment => only("Deployment");
  const podSpec = () => {
    const spec = deployment().spec?.template.spec;
    assert.ok(spec, "the Deployment has a pod template");
    return spec;
  };
  const volumes = (): V1Volume[] => podSpec().volumes ?? [];
  const sidecar = (): V1Container => {
    const found = podSpec().initContainers?.find((c) => c.name === "plugpool");
    assert.ok(found, "plugpool is an init container");
    return found;
  };
  const autoscaler = (): V1Container => {
    const found = podSpec().containers;
    assert.equal(found.length, 1, "cluster-autoscaler is the pod's only regular container");
    return found[0] as V1Container;
  };
  const flag = (name: string): string | undefined => {
    const prefix = `--${name}=`;
    return autoscaler().command?.find((a) => a.startsWith(prefix))?.slice(prefix.length);
  };
  const configMapData = (name: string, key: string): string => {
    const text = (only("ConfigMap", name) as V1ConfigMap).data?.[key];
    assert.ok(text !== undefined, `ConfigMap ${name} has key ${key}`);
    return text;
  };
  /** The ConfigMap key a container reads at `path` through a whole-ConfigMap volume mount. */
  const configMapFileAt = (c: V1Container, path: string): { configMap: string; key: string } | undefined => {
    const mount = c.volumeMounts?.find((m) => m.mountPath === dirname(path));
    const volume = volumes().find((v) => v.name === mount?.name);
    if (volume?.configMap === undefined || volume.configMap.items !== undefined) return undefined;
    return { configMap: volume.configMap.name ?? "", key: basename(path) };
  };
  const pluginConfig = (): AppConfig => {
    const args = sidecar().args ?? [];
    assert.deepEqual(args.slice(0, 2), ["serve", "--config"]);
    const file = configMapFileAt(sidecar(), args[2] ?? "");
    assert.ok(file !== undefined, "plugpool's --config is a mounted ConfigMap key");
    return loadConfig(configMapData(file.configMap, file.key), (only("Secret", "plug-credentials") as V1Secret).stringData ?? {});
  };
  const serviceAccount = (): string => podSpec().serviceAccountName ?? "default";

  before(async () => {
    const chart = chartArchive();
    assert.ok(chart !== undefined);
    const text = await helmTemplate({ chart, release, namespace, valuesFiles: [valuesFile], kubeVersion });
    objects = parseAllDocuments(text).map((d) => d.toJS() as KubernetesObject | null).filter((o): o is KubernetesObject => o !== null);
  });
  after(async () => {
    await plane?.stop();
  });

  it("renders two replicas, rolled one at a time under a PodDisruptionBudget, cluster-autoscaler elected and plugpool following it", () => {
    assert.equal(deployment().spec?.replicas, 2);
    assert.deepEqual(deployment().spec?.strategy, { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    assert.equal(flag("leader-elect"), undefined, "cluster-autoscaler's default: elected");
    const pdb = (only("PodDisruptionBudget") as V1PodDisruptionBudget).spec;
    assert.equal(pdb?.maxUnavailable, 1);
    const labels = deployment().spec?.template.metadata?.labels ?? {};
    const selected = Object.entries(pdb.selector?.matchLabels ?? {});
    assert.ok(selected.length > 0 && selected.every(([k, v]) => labels[k] === v), "the budget selects the pods");
    const env = Object.fromEntries((sidecar().env ?? []).map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]));
    assert.deepEqual([env.POD_NAME, env.POD_NAMESPACE], ["metadata.name", "metadata.namespace"]);
    assert.deepEqual(pluginConfig().leaderElection.followAutoscaler, { name: "cluster-autoscaler" });
    assert.equal(flag("namespace"), namespace, "cluster-autoscaler's Lease is in the pod's namespace, where plugpool looks");
  });

  it("runs plugpool as a native sidecar: an init container that restarts Always, with startup, liveness and readiness probes", () => {
    const plugpool = sidecar();
    assert.equal(plugpool.restartPolicy, "Always");
    const ops = plugpool.ports?.find((p) => p.name === "ops");
    assert.equal(ops?.containerPort, pluginConfig().opsListen.port);
    const probe = (p: V1Container["startupProbe"]) => [p?.httpGet?.path, p?.httpGet?.port];
    // cluster-autoscaler starts once this passes: plugpool's view is synced and its gRPC serves.
    assert.deepEqual(probe(plugpool.startupProbe), ["/readyz", "ops"]);
    assert.deepEqual(probe(plugpool.livenessProbe), ["/healthz", "ops"]);
    assert.deepEqual(probe(plugpool.readinessProbe), ["/readyz", "ops"]);
    assert.ok(!podSpec().containers.some((c) => c.name === "plugpool"), "plugpool is not a regular container");
  });

  it("points cluster-autoscaler at plugpool: externalgrpc, and a cloud-config mounted from the ConfigMap holding plugpool's listen address", () => {
    assert.equal(flag("cloud-provider"), "externalgrpc");
    assert.equal(flag("namespace"), namespace);
    const path = flag("cloud-config");
    assert.equal(path, "/etc/cluster-autoscaler/cloud-config");
    const file = configMapFileAt(autoscaler(), path);
    assert.ok(file !== undefined, "--cloud-config is a mounted ConfigMap key");
    const cloudConfig = parse(configMapData(file.configMap, file.key)) as { address?: string };
    const { listen } = pluginConfig();
    assert.equal(cloudConfig.address, `${listen.host}:${listen.port}`);
  });

  it("gives plugpool a configuration the loader accepts and both credential variables from keys of the Secret", () => {
    assert.deepEqual(pluginConfig().pool.groups.map((g) => [g.id, g.machines.length]), [["gpu", 2], ["workers", 3]]);
    const secret = only("Secret", "plug-credentials") as V1Secret;
    assert.equal(secret.metadata?.namespace, namespace);
    for (const name of ["PLUGPOOL_PLUG_USERNAME", "PLUGPOOL_PLUG_PASSWORD"]) {
      const ref = sidecar().env?.find((e) => e.name === name)?.valueFrom?.secretKeyRef;
      assert.equal(ref?.name, "plug-credentials", name);
      assert.ok(ref.key in (secret.stringData ?? {}), `${name} from key ${ref.key}`);
    }
  });

  it("creates the power-off namespace plugpool's config names, labelled to admit privileged pods", () => {
    const powerOff = only("Namespace", pluginConfig().powerOffPod.namespace) as V1Namespace;
    assert.equal(powerOff.metadata?.labels?.["pod-security.kubernetes.io/enforce"], "privileged");
  });

  it("pins in the power-off pod policy the image plugpool's config sets and the pod's ServiceAccount", () => {
    const policy = only("ValidatingAdmissionPolicy", "plugpool-power-off-pods") as
      { spec: { variables: { name: string; expression: string }[]; matchConditions: { expression: string }[] } };
    assert.equal(policy.spec.variables.find((v) => v.name === "image")?.expression, JSON.stringify(pluginConfig().powerOffPod.image));
    assert.equal(policy.spec.matchConditions[0]?.expression, `request.userInfo.username == "system:serviceaccount:${namespace}:${serviceAccount()}"`);
  });

  describe("matches the kustomize example in deploy/examples", () => {
    const example = (kind: string, name: string): KubernetesObject => {
      const found = ["rbac.yaml", "power-off-pod-policy.yaml", "deployment.yaml"].flatMap(exampleManifest).find((o) => o.kind === kind && o.metadata?.name === name);
      assert.ok(found, `deploy/examples has ${kind} ${name}`);
      return found;
    };
    const rules = (o: KubernetesObject): unknown => (o as V1Role).rules;

    it("grants plugpool the same rules, in the power-off namespace", () => {
      assert.deepEqual(rules(only("ClusterRole", "plugpool")), rules(example("ClusterRole", "plugpool")));
      const role = only("Role", "plugpool");
      assert.deepEqual(rules(role), rules(example("Role", "plugpool")));
      assert.equal(role.metadata?.namespace, pluginConfig().powerOffPod.namespace);
      const follow = only("Role", "plugpool-follow-autoscaler");
      assert.deepEqual(rules(follow), rules(example("Role", "plugpool-follow-autoscaler")));
      assert.equal(follow.metadata?.namespace, namespace, "where cluster-autoscaler keeps its Lease");
    });

    it("has the same power-off pod policy but for the ServiceAccount it names", () => {
      const spec = (o: KubernetesObject): unknown => ({ ...(o as { spec: object }).spec, matchConditions: undefined });
      assert.deepEqual(spec(only("ValidatingAdmissionPolicy", "plugpool-power-off-pods")), spec(example("ValidatingAdmissionPolicy", "plugpool-power-off-pods")));
      assert.deepEqual(spec(only("ValidatingAdmissionPolicyBinding", "plugpool-power-off-pods")), spec(example("ValidatingAdmissionPolicyBinding", "plugpool-power-off-pods")));
    });

    it("runs the same plugpool container, probes and all, and gives cluster-autoscaler every flag the example does", () => {
      const pod = (example("Deployment", "cluster-autoscaler") as V1Deployment).spec?.template.spec;
      const { name, image, args, env, ports, livenessProbe, readinessProbe, resources, securityContext } = pod?.containers.find((c) => c.name === "plugpool") ?? { name: "" };
      const rendered = sidecar();
      assert.deepEqual(
        { name: rendered.name, image: rendered.image, args: rendered.args, env: rendered.env, ports: rendered.ports, livenessProbe: rendered.livenessProbe,
          readinessProbe: rendered.readinessProbe, resources: rendered.resources, securityContext: rendered.securityContext },
        { name, image, args, env, ports, livenessProbe, readinessProbe, resources, securityContext },
      );
      const flags = new Set(autoscaler().command);
      const exampleFlags = pod?.containers.find((c) => c.name === "cluster-autoscaler")?.args ?? [];
      // The example runs one replica without election; the chart runs two, elected.
      assert.deepEqual(exampleFlags.filter((f) => !flags.has(f)), ["--leader-elect=false"]);
      assert.deepEqual(autoscaler().image, pod?.containers.find((c) => c.name === "cluster-autoscaler")?.image);
    });
  });

  it("carries the pod label deploy/monitoring's PodMonitor selects, and turns on the per-group metrics its backoff alert reads", () => {
    const podMonitor = parse(readFileSync(join(root, "deploy", "monitoring", "podmonitor.yaml"), "utf8")) as { spec: { selector: { matchLabels: Record<string, string> } } };
    const labels = deployment().spec?.template.metadata?.labels ?? {};
    for (const [key, value] of Object.entries(podMonitor.spec.selector.matchLabels)) assert.equal(labels[key], value, key);
    assert.ok(sidecar().ports?.some((p) => p.name === "ops"));
    assert.equal(flag("emit-per-nodegroup-metrics"), "true");
  });

  it("starts nothing but flags cluster-autoscaler 1.36 knows, with values it parses", { skip: autoscalerMissing() }, async () => {
    const missing = autoscalerNotBuilt();
    assert.equal(missing, undefined);
    const [program, ...args] = autoscaler().command ?? [];
    assert.equal(program, "./cluster-autoscaler");
    // --help last: cluster-autoscaler parses every flag before it and exits 0, or exits 2 naming the first it refuses.
    await promisify(execFile)(autoscalerBinaryPath(), [...args, "--help"]).catch((error: unknown) => {
      const { code, stderr } = error as { code?: number; stderr?: string };
      assert.fail(`cluster-autoscaler exits ${String(code)} on the rendered flags ${args.join(" ")}: ${stderr?.split("\n")[0] ?? ""}`);
    });
  });

  describe("on a real kube-apiserver", () => {
    before(async () => {
      plane = await startControlPlane();
      admin = plane.admin();
      // As `helm install --create-namespace` would, but enforcing "restricted": the pod needs no privilege.
      await admin.makeApiClient(CoreV1Api).createNamespace({
        body: { metadata: { name: namespace, labels: { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest" } } },
      });
    });

    it("installs with helm install, every rendered object accepted and there afterwards", async () => {
      const chart = chartArchive() ?? "";
      await helm(["install", release, chart, "--namespace", namespace, "--values", valuesFile, "--kubeconfig", (plane as ControlPlane).kubeconfigPath]);
      const client = KubernetesObjectApi.makeApiClient(admin);
      const missing: string[] = [];
      for (const object of objects) {
        const { apiVersion = "", kind = "", metadata: { name = "", namespace: where } = {} } = object;
        await client.read({ apiVersion, kind, metadata: { name, ...(where === undefined ? {} : { namespace: where }) } }).catch(() => {
          missing.push(`${kind} ${name}`);
        });
      }
      assert.deepEqual(missing, []);
      assert.ok(objects.length >= 15, `${objects.length} objects rendered`);
    });

    it("admits the Deployment's pod, sidecar included, where Pod Security enforces restricted (dry run)", async () => {
      const pod: V1Pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "check", namespace, labels: deployment().spec?.template.metadata?.labels ?? {} }, spec: podSpec() };
      const created = await admin.makeApiClient(CoreV1Api).createNamespacedPod({ namespace, body: pod, dryRun: "All" });
      assert.deepEqual(created.spec?.initContainers?.map((c) => [c.name, c.restartPolicy]), [["plugpool", "Always"]]);
    });

    it("allows the pod's ServiceAccount every request plugpool makes (SubjectAccessReview)", async () => {
      const authorization = admin.makeApiClient(AuthorizationV1Api);
      const denied: string[] = [];
      const leases = { lease: pluginConfig().leaderElection.lease, autoscaler: { namespace, name: "cluster-autoscaler" } };
      for (const access of requiredAccess(pluginConfig().powerOffPod.namespace, leases)) {
        const review = await authorization.createSubjectAccessReview({
          body: {
            spec: {
              user: `system:serviceaccount:${namespace}:${serviceAccount()}`,
              groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
              resourceAttributes: { verb: access.verb, resource: access.resource, group: access.group ?? "", namespace: access.namespace, name: access.name },
            },
          },
        });
        if (review.status?.allowed !== true) denied.push(`${access.verb} ${access.resource}${access.name === undefined ? "" : ` ${access.name}`} in ${access.namespace ?? "(cluster)"}`);
      }
      assert.deepEqual(denied, []);
    });

    it("admits plugpool's power-off pod created as the ServiceAccount in the power-off namespace, and the policy refuses any other", async () => {
      const asServiceAccount = await (plane as ControlPlane).asServiceAccount(namespace, serviceAccount());
      const core = asServiceAccount.makeApiClient(CoreV1Api);
      const { namespace: powerOffNamespace, image } = pluginConfig().powerOffPod;
      const powerOffPod = powerOffPodManifest({ namespace: powerOffNamespace, image, machine: "worker-1", nodeName: "worker-1", startedAt: Date.now() });
      const other = structuredClone(powerOffPod);
      for (const c of other.spec?.containers ?? []) c.image = "alpine:3";
      // The ServiceAccount every pod names by default; kube-controller-manager creates it, and none runs here.
      await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccount({ namespace: powerOffNamespace, body: { metadata: { name: "default" } } });
      // The apiserver takes a new policy up a moment after it is created.
      const deadline = Date.now() + 60_000;
      for (;;) {
        const answer = await core.createNamespacedPod({ namespace: powerOffNamespace, body: other, dryRun: "All" }).then(
          () => "admitted",
          (error: unknown) => (error instanceof ApiException ? String((error as ApiException<unknown>).body) : String(error)),
        );
        if (answer.includes("ValidatingAdmissionPolicy 'plugpool-power-off-pods'")) break;
        assert.ok(Date.now() < deadline, `the power-off pod policy refuses a pod with another image within 60 s; the last answer: ${answer}`);
        await sleep(200);
      }
      const created = await core.createNamespacedPod({ namespace: powerOffNamespace, body: powerOffPod, dryRun: "All" });
      assert.equal(created.spec?.hostPID, true);
      assert.equal(created.spec.nodeName, "worker-1");
    });
  });
});
