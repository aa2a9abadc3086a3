// deploy/examples/power-off-pod-policy.yaml against a real kube-apiserver: as the example ServiceAccount,
// plugpool's own power-off pod is admitted and every other pod is refused with the policy's message;
// other users and cluster-autoscaler's evictions are left alone.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ApiException, CoreV1Api, type KubeConfig, type V1ConfigMap, type V1Pod } from "@kubernetes/client-node";
import { powerOffPodManifest } from "../../src/adapters/kubernetes/power-off-pod.ts";
import { loadConfig } from "../../src/app/config/index.ts";
import { startControlPlane, type ControlPlane } from "../harness/control-plane/index.ts";
import { apply, createNamespace, exampleManifest } from "../adapters/kubernetes/support.ts";

const POLICY = "plugpool-power-off-pods";
const namespace = "plugpool";
const serviceAccount = "cluster-autoscaler";

const policy = exampleManifest("power-off-pod-policy.yaml");
const configMap = exampleManifest("plugpool-config.yaml").find((o) => o.kind === "ConfigMap") as V1ConfigMap;
const { image } = loadConfig(configMap.data?.["config.yaml"] ?? "", {}).powerOffPod;

/** plugpool's power-off pod for `machine`, as its adapter creates it, with the example's image. */
function powerOffPod(machine: string): V1Pod {
  return powerOffPodManifest({ namespace, image, machine, nodeName: machine, startedAt: Date.now() });
}

/** The policy's refusal: 403, naming the policy and carrying `message`. */
function refusedWith(message: RegExp): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof ApiException, String(error));
    const body = String((error as ApiException<unknown>).body);
    assert.equal((error as ApiException<unknown>).code, 403, body);
    const status = JSON.parse(body) as { message: string };
    assert.match(status.message, new RegExp(`ValidatingAdmissionPolicy '${POLICY}' .* denied request: `));
    assert.match(status.message, message);
    return true;
  };
}

describe("deploy/examples/power-off-pod-policy.yaml", () => {
  let plane: ControlPlane;
  let admin: KubeConfig;
  let asServiceAccount: CoreV1Api;

  before(async () => {
    plane = await startControlPlane();
    admin = plane.admin();
    const core = admin.makeApiClient(CoreV1Api);
    await apply(admin, [...exampleManifest("namespace.yaml"), ...exampleManifest("rbac.yaml"), ...policy]);
    await createNamespace(core, namespace);
    asServiceAccount = (await plane.asServiceAccount(namespace, serviceAccount)).makeApiClient(CoreV1Api);
    // The apiserver takes up a new policy a moment after it is created.
    const probe = powerOffPod("probe");
    spec(probe).containers = [{ name: "probe", image: "probe" }];
    for (let waited = 0; ; waited += 100) {
      const refused = await asServiceAccount.createNamespacedPod({ namespace, body: probe, dryRun: "All" }).then(
        () => false,
        (error: unknown) => error instanceof ApiException && String(error.body).includes(POLICY),
      );
      if (refused) break;
      if (waited > 20_000) throw new Error(`the policy ${POLICY} did not take effect within 20 s`);
      await sleep(100);
    }
  });
  after(async () => {
    await plane.stop();
  });

  it("pins the image plugpool-config.yaml sets as powerOff.image, and matches rbac.yaml's ServiceAccount", () => {
    const { variables, matchConditions } = (policy[0] as { spec: { variables: { name: string; expression: string }[]; matchConditions: { expression: string }[] } }).spec;
    assert.equal(variables.find((v) => v.name === "image")?.expression, JSON.stringify(image));
    assert.match(matchConditions[0]?.expression ?? "", new RegExp(`"system:serviceaccount:${namespace}:${serviceAccount}"`));
  });

  it("admits plugpool's own power-off pod created as the ServiceAccount", async () => {
    const created = await asServiceAccount.createNamespacedPod({ namespace, body: powerOffPod("worker-1") });
    assert.equal(created.spec?.nodeName, "worker-1");
    assert.deepEqual(created.spec.volumes ?? [], []);
  });

  const variants: [string, (pod: V1Pod) => void, RegExp][] = [
    ["another command", (pod) => { container(pod).command = ["sh", "-c", "cat /proc/1/root/etc/shadow"]; }, /exactly "nsenter -t 1 -m -u -i -n -p -- systemctl poweroff"/],
    ["arguments after the command", (pod) => { container(pod).args = ["--", "sh"]; }, /without args/],
    ["another image", (pod) => { container(pod).image = "alpine:3.22"; }, /the image set as powerOff.image/],
    ["an extra hostPath volume", (pod) => {
      spec(pod).volumes = [{ name: "host", hostPath: { path: "/" } }];
      container(pod).volumeMounts = [{ name: "host", mountPath: "/host" }];
    }, /no volumes, volume mounts or devices/],
    ["no nodeName", (pod) => { delete spec(pod).nodeName; }, /bound to its node/],
    ["a second container", (pod) => { spec(pod).containers.push({ name: "second", image: container(pod).image }); }, /exactly one container/],
    ["an init container", (pod) => { spec(pod).initContainers = [{ name: "init", image: container(pod).image }]; }, /no init or ephemeral containers/],
    ["the host's network", (pod) => { spec(pod).hostNetwork = true; }, /host's PID namespace only/],
    ["no hostPID", (pod) => { spec(pod).hostPID = false; }, /host's PID namespace only/],
    ["a ServiceAccount token", (pod) => { delete spec(pod).automountServiceAccountToken; }, /no ServiceAccount token|no volumes/],
    ["no plugpool labels", (pod) => { (pod.metadata ??= {}).labels = { app: "debug" }; }, /plugpool creates only power-off pods/],
  ];
  for (const [what, change, message] of variants) {
    it(`refuses, as the ServiceAccount, a privileged pod with ${what}`, async () => {
      const pod = powerOffPod("worker-2");
      change(pod);
      await assert.rejects(asServiceAccount.createNamespacedPod({ namespace, body: pod, dryRun: "All" }), refusedWith(message));
    });
  }

  it("leaves other users alone: the admin may create any pod there", async () => {
    const pod = powerOffPod("worker-3");
    container(pod).command = ["sleep", "1"];
    await admin.makeApiClient(CoreV1Api).createNamespacedPod({ namespace, body: pod, dryRun: "All" });
  });

  it("leaves cluster-autoscaler's evictions alone", async () => {
    const core = admin.makeApiClient(CoreV1Api);
    await createNamespace(core, "apps");
    await core.createNamespacedPod({ namespace: "apps", body: { metadata: { name: "web" }, spec: { containers: [{ name: "web", image: "nginx" }] } } });
    await asServiceAccount.createNamespacedPodEviction({
      name: "web", namespace: "apps", body: { apiVersion: "policy/v1", kind: "Eviction", metadata: { name: "web", namespace: "apps" } },
    });
    const evicted = await core.readNamespacedPod({ name: "web", namespace: "apps" }).then((pod) => pod.metadata?.deletionTimestamp !== undefined, () => true);
    assert.ok(evicted, "the pod is gone or terminating");
  });
});

function spec(pod: V1Pod): NonNullable<V1Pod["spec"]> {
  assert.ok(pod.spec);
  return pod.spec;
}

function container(pod: V1Pod): NonNullable<V1Pod["spec"]>["containers"][number] {
  const [first] = spec(pod).containers;
  assert.ok(first);
  return first;
}
