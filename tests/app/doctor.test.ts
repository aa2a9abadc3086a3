// `plugpool doctor` against emulated plugs and a real kube-apiserver, as the example deployment's
// ServiceAccount (deploy/examples/rbac.yaml): a healthy setup passes and names every plug and check; each
// problem fails the row that names it, and only that row; no credential ever reaches the report.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CoreV1Api, KubeConfig, type V1ClusterRoleBinding, type V1RoleBinding } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { doctor, type DoctorReport } from "../../src/app/doctor.ts";
import { callOptions } from "../../src/adapters/kubernetes/api-errors.ts";
import { startControlPlane, type ControlPlane } from "../harness/control-plane/index.ts";
import { startPlugEmulator, type EmulatedPlug } from "../harness/plug-emulator/index.ts";
import { apply, createNamespace, exampleManifest, nodeBody } from "../adapters/kubernetes/support.ts";
import { load, group, node, config } from "./fixtures/config-builders.ts";

// Appear nowhere else: finding either in a report means a credential leaked.
const USERNAME = "plug-admin-q7";
const PASSWORD = "s3cr3t-Pa55";
const env = { PLUGPOOL_PLUG_USERNAME: USERNAME, PLUGPOOL_PLUG_PASSWORD: PASSWORD };
const auth = { type: "basic", username: USERNAME, password: PASSWORD } as const;
const NAMESPACE = "plugpool";

type Fields = Record<string, unknown>;

const failed = (report: DoctorReport): string[] => report.rows.filter((r) => r.status === "FAIL").map((r) => r.subject);
const rowOf = (report: DoctorReport, subject: string) => {
  const row = report.rows.find((r) => r.subject.startsWith(subject));
  assert.ok(row, `a row for ${subject} in\n${report.text}`);
  return row;
};

describe("doctor (emulated plugs, real apiserver)", () => {
  let plane: ControlPlane;
  let core: CoreV1Api;
  let asPlugpool: KubeConfig;
  let modern: EmulatedPlug;
  let legacy: EmulatedPlug;
  const reports: DoctorReport[] = [];
  const others: EmulatedPlug[] = [];

  /** The healthy machines (worker-1 registered, worker-2 off) plus `extra` nodes in a second group. */
  const configWith = (extra: readonly Fields[] = []): Fields =>
    config([
      group("workers", [
        node("worker-1", { url: modern.url, switch: "Relay", powerSensor: "Power" }),
        node("worker-2", { url: legacy.url, switch: "Relay" }),
      ]),
      ...(extra.length === 0 ? [] : [group("more", extra)]),
    ]);
  const check = async (doc: Fields, kubeConfig = asPlugpool): Promise<DoctorReport> => {
    const report = await doctor(load(doc, env), { kubeConfig });
    reports.push(report);
    return report;
  };
  const emulator = async (options: Parameters<typeof startPlugEmulator>[0]): Promise<EmulatedPlug> => {
    const plug = await startPlugEmulator(options);
    others.push(plug);
    return plug;
  };

  before(async () => {
    plane = await startControlPlane();
    const admin = plane.admin();
    core = admin.makeApiClient(CoreV1Api);
    await apply(admin, [...exampleManifest("namespace.yaml"), ...exampleManifest("rbac.yaml")]);
    // No controller-manager here: the ServiceAccount pods run as must be created by hand.
    await createNamespace(core, NAMESPACE);
    asPlugpool = await plane.asServiceAccount(NAMESPACE, "cluster-autoscaler");
    [modern, legacy] = await Promise.all([
      startPlugEmulator({ version: "2026.7", platform: "esp32", auth, switches: [{ name: "Relay", powerSensor: "Power" }] }),
      startPlugEmulator({ version: "2025.12", platform: "esp8266", auth }),
    ]);
    modern.setState("Relay", true);
    // As its kubelet registers it: the template's arch and os labels, and room for what the template promises.
    await core.createNode({
      body: nodeBody({
        name: "worker-1",
        providerID: "k3s://worker-1",
        labels: { "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux" },
        allocatable: { cpu: "24", memory: "64Gi", pods: "110" },
      }),
    });
  });
  after(async () => {
    await Promise.all([modern, legacy, ...others].map((p) => p.close()));
    await plane.stop();
  });

  it("passes a healthy setup and names every plug and check", async () => {
    const report = await check(configWith());
    assert.equal(report.ok, true, report.text);
    assert.deepEqual(failed(report), []);
    for (const subject of ["file", `worker-1 (plug ${modern.url}`, `worker-2 (plug ${legacy.url}`, "permissions", `power-off namespace ${NAMESPACE}`, "node worker-1", "node worker-2"]) {
      assert.ok(report.text.includes(subject), `${subject} in\n${report.text}`);
    }
    assert.match(rowOf(report, "worker-1").detail, /^on; entity by name .*auth basic, \d+(\.\d+)? W$/);
    assert.match(rowOf(report, "worker-2").detail, /^off; entity by object_id/);
    assert.match(rowOf(report, "node worker-1").detail, /registered as worker-1, matched by providerID, Ready/);
    assert.match(rowOf(report, "node worker-2").detail, /not registered/);
    assert.match(report.text, /all checks passed\n$/);
  });

  it("fails the plug whose credentials the device rejects", async () => {
    const plug = await emulator({ auth: { ...auth, password: "another-one" } });
    const report = await check(configWith([node("worker-auth", { url: plug.url, switch: "Relay" })]));
    assert.equal(report.ok, false);
    assert.deepEqual(failed(report), [`worker-auth (plug ${plug.url} switch "Relay")`]);
    assert.match(rowOf(report, "worker-auth").detail, /rejected the credentials/);
  });

  it("fails the plug that echoes the request back, without a byte of it in the report", async () => {
    const plug = await emulator({ auth });
    await plug.inject({ kind: "echo", withAuth: true });
    const report = await check(configWith([node("worker-echo", { url: plug.url, switch: "Relay" })]));
    const row = rowOf(report, "worker-echo");
    assert.equal(row.status, "FAIL");
    assert.match(row.detail, /answered without a switch state \(text\/plain, \d+ bytes\)$/);
    const basic = Buffer.from(`${USERNAME}:${PASSWORD}`).toString("base64");
    assert.ok(!report.text.includes(basic) && !JSON.stringify(report.rows).includes(basic), report.text);
  });

  it("fails a machine whose plug is on with no Node and no power-on record, and passes one plugpool switched on", async () => {
    const outside = await emulator({ auth });
    const booting = await emulator({ auth });
    outside.setState("Relay", true);
    booting.setState("Relay", true);
    await plane.admin().makeApiClient(CoreV1Api).patchNamespacedConfigMap(
      { name: "plugpool-records", namespace: NAMESPACE, body: { data: { "power-on.worker-booting": JSON.stringify({ at: 1, why: "scale-up" }) } } },
      callOptions({ contentType: "application/merge-patch+json" }),
    ).catch(async () => {
      await core.createNamespacedConfigMap({
        namespace: NAMESPACE,
        body: { metadata: { name: "plugpool-records" }, data: { "power-on.worker-booting": JSON.stringify({ at: 1, why: "scale-up" }) } },
      });
    });
    const report = await check(configWith([
      node("worker-outside", { url: outside.url, switch: "Relay" }),
      node("worker-booting", { url: booting.url, switch: "Relay" }),
    ]));
    assert.deepEqual(failed(report), ["node worker-outside"]);
    assert.match(rowOf(report, "node worker-outside").detail, /powered outside plugpool/);
    assert.match(rowOf(report, "node worker-booting").detail, /booting \(switched on by plugpool\)/);
  });

  it("fails the plug whose switch entity does not exist", async () => {
    const report = await check(configWith([node("worker-typo", { url: modern.url, switch: "Relay 9" })]));
    assert.equal(report.ok, false);
    assert.deepEqual(failed(report), [`worker-typo (plug ${modern.url} switch "Relay 9")`]);
    assert.match(rowOf(report, "worker-typo").detail, /not found \(HTTP 404/);
  });

  it("fails the plug that cannot be reached", async () => {
    const plug = await emulator({});
    await plug.inject({ kind: "down" });
    const report = await check(configWith([node("worker-down", { url: plug.url, switch: "Relay" })]));
    assert.equal(report.ok, false);
    assert.deepEqual(failed(report), [`worker-down (plug ${plug.url} switch "Relay")`]);
    assert.match(rowOf(report, "worker-down").detail, /connection refused/);
  });

  it("fails the permissions check, naming what is missing, for a ServiceAccount without the example RBAC", async () => {
    const nobody = await plane.asServiceAccount(NAMESPACE, "nobody");
    const report = await check(configWith(), nobody);
    assert.equal(report.ok, false);
    assert.ok(failed(report).includes("permissions"), report.text);
    assert.match(rowOf(report, "permissions").detail, /^missing: .*delete nodes.*create pods in plugpool/);
  });

  it("names exactly the rights plugpool lacks when only cluster-autoscaler's roles are bound", async () => {
    const admin = plane.admin();
    const caOnly = await plane.asServiceAccount(NAMESPACE, "ca-only");
    const subjects = [{ kind: "ServiceAccount", name: "ca-only", namespace: NAMESPACE }];
    const clusterBinding: V1ClusterRoleBinding = {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: { name: "ca-only" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-autoscaler" }, subjects,
    };
    const binding: V1RoleBinding = {
      apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: "ca-only", namespace: NAMESPACE },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "cluster-autoscaler" }, subjects,
    };
    await apply(admin, [clusterBinding, binding]);
    const report = await check(configWith(), caOnly);
    assert.equal(report.ok, false);
    // No right to create pods: the dry run of the power-off pod is refused too.
    assert.deepEqual(failed(report), ["permissions", `power-off namespace ${NAMESPACE}`]);
    const { detail } = rowOf(report, "permissions");
    for (const right of ["patch nodes", "delete nodes", "create pods in plugpool", "delete pods in plugpool", "patch configmaps plugpool-template-slices in plugpool"]) {
      assert.ok(detail.includes(right), `${right} in ${detail}`);
    }
    assert.ok(!detail.includes("list nodes"), detail);
  });

  it("fails the node whose Node carries another providerID", async () => {
    const plug = await emulator({});
    await core.createNode({ body: nodeBody({ name: "worker-3", providerID: "kind://worker-3" }) });
    try {
      const report = await check(configWith([node("worker-3", { url: plug.url, switch: "Relay" })]));
      assert.equal(report.ok, false);
      assert.deepEqual(failed(report), ["node worker-3"]);
      assert.match(rowOf(report, "node worker-3").detail, /providerID is "kind:\/\/worker-3", expected "k3s:\/\/worker-3"/);
    } finally {
      await core.deleteNode({ name: "worker-3" });
    }
  });

  it("fails the power-off namespace when Pod Security refuses privileged pods there", async () => {
    const label = (level: string) =>
      core.patchNamespace(
        { name: NAMESPACE, body: { metadata: { labels: { "pod-security.kubernetes.io/enforce": level } } } },
        callOptions({ contentType: "application/merge-patch+json" }),
      );
    await label("baseline");
    try {
      const report = await check(configWith());
      assert.equal(report.ok, false);
      assert.deepEqual(failed(report), [`power-off namespace ${NAMESPACE}`]);
      assert.match(rowOf(report, "power-off namespace").detail, /PodSecurity/);
    } finally {
      await label("privileged");
    }
  });

  it("never puts a plug credential in a report", () => {
    assert.ok(reports.length >= 8);
    for (const report of reports) {
      for (const secret of [USERNAME, PASSWORD]) {
        assert.ok(!report.text.includes(secret) && !JSON.stringify(report.rows).includes(secret), `${secret} leaked into\n${report.text}`);
      }
    }
  });

  describe("plugpool doctor (the command line)", () => {
    const run = promisify(execFile);
    const main = join(import.meta.dirname, "..", "..", "src", "app", "main.ts");
    let dir: string;
    let kubeconfig: string;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "plugpool-doctor-"));
      kubeconfig = await plane.kubeconfigFor(asPlugpool);
    });
    after(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    const doctorCli = async (doc: Fields) => {
      const file = join(dir, `config-${String(Math.random()).slice(2)}.yaml`);
      writeFileSync(file, stringify(doc));
      // Asynchronous: the emulated plugs answer from this process's event loop.
      return run(process.execPath, [main, "doctor", "--config", file, "--kubeconfig", kubeconfig], { env: { PATH: process.env.PATH ?? "", ...env }, timeout: 30_000 })
        .then(({ stdout }) => ({ code: 0, stdout }))
        .catch((error: unknown) => {
          const { code, stdout } = error as { code?: number; stdout?: string };
          return { code, stdout: stdout ?? "" };
        });
    };

    it("exits 0 and prints the table for a healthy setup", async () => {
      const { code, stdout } = await doctorCli(configWith());
      assert.equal(code, 0, stdout);
      assert.match(stdout, /^AREA +SUBJECT +STATUS +DETAIL\n/);
      assert.match(stdout, /all checks passed\n$/);
      assert.ok(!stdout.includes(PASSWORD));
    });

    it("exits 1 when a check fails", async () => {
      const plug = await emulator({});
      await plug.inject({ kind: "down" });
      const { code, stdout } = await doctorCli(configWith([node("worker-down", { url: plug.url, switch: "Relay" })]));
      assert.equal(code, 1, stdout);
      assert.match(stdout, /1 check\(s\) failed\n$/);
      assert.ok(!stdout.includes(PASSWORD));
    });
  });
});

describe("doctor (no apiserver)", () => {
  it("never shows the credentials of a kubeconfig's server URL, in the subject or the reason", async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: "https://kubeadmin:S3cretPw@127.0.0.1:1" }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const report = await doctor(load(config()), { kubeConfig: kc, probe: () => Promise.reject(new Error("no plug here")) });
    const cluster = rowOf(report, "https://");
    assert.equal(cluster.subject, "https://[redacted]@127.0.0.1:1");
    assert.match(cluster.detail, /^cannot reach the apiserver: .*https:\/\/\[redacted\]@127\.0\.0\.1:1\//);
    assert.doesNotMatch(report.text, /S3cretPw|kubeadmin/);
  });
});
