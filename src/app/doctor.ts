// `plugpool doctor`: checks the configuration, every plug and the cluster access plugpool needs, and prints
// one table. It changes nothing: plugs are only read, and the power-off pod is only tried with dryRun=All.
import { AuthorizationV1Api, CoreV1Api, VersionApi, type KubeConfig } from "@kubernetes/client-node";
import type { Machine, PlugAddress } from "../domain/index.ts";
import { createEsphomePowerSwitch, type PlugProbe } from "../adapters/esphome/esphome-power-switch.ts";
import { apiserverReason } from "../adapters/kubernetes/api-errors.ts";
import { powerOffPodManifest } from "../adapters/kubernetes/power-off-pod.ts";
import type { AppConfig } from "./config.ts";

type Status = "ok" | "warn" | "FAIL";

interface Row {
  readonly area: string;
  readonly subject: string;
  readonly status: Status;
  readonly detail: string;
}

export interface DoctorReport {
  /** No check failed (warnings allowed). */
  readonly ok: boolean;
  readonly rows: readonly Row[];
  readonly text: string;
}

export interface DoctorDeps {
  readonly kubeConfig: KubeConfig;
  /** How plugs are probed; defaults to the ESPHome adapter with the configured timeout and credentials. */
  readonly probe?: (plug: PlugAddress) => Promise<PlugProbe>;
}

/** What plugpool does on the cluster, as SelfSubjectAccessReview attributes (namespace "" = cluster-wide). */
function requiredAccess(namespace: string) {
  return [
    { verb: "list", resource: "nodes", group: "", namespace: "" },
    { verb: "watch", resource: "nodes", group: "", namespace: "" },
    { verb: "patch", resource: "nodes", group: "", namespace: "" },
    { verb: "delete", resource: "nodes", group: "", namespace: "" },
    { verb: "list", resource: "resourceslices", group: "resource.k8s.io", namespace: "" },
    { verb: "watch", resource: "resourceslices", group: "resource.k8s.io", namespace: "" },
    { verb: "create", resource: "events", group: "", namespace: "default" },
    { verb: "create", resource: "pods", group: "", namespace },
    { verb: "delete", resource: "pods", group: "", namespace },
    { verb: "list", resource: "pods", group: "", namespace },
    { verb: "watch", resource: "pods", group: "", namespace },
    { verb: "create", resource: "configmaps", group: "", namespace },
    { verb: "update", resource: "configmaps", group: "", namespace },
  ] as const;
}

export async function doctor(config: AppConfig, deps: DoctorDeps): Promise<DoctorReport> {
  const machines = config.pool.groups.flatMap((g) => g.machines);
  const rows: Row[] = [
    {
      area: "config",
      subject: "file",
      status: "ok",
      detail: `${config.pool.groups.length} group(s), ${machines.length} machine(s); gRPC on ${config.listen.host}:${config.listen.port}${config.tls ? " (mTLS)" : ""}; credentials ${config.credentials ? "set" : "not set"}`,
    },
  ];
  const [plugRows, clusterRows] = await Promise.all([checkPlugs(config, machines, deps), checkCluster(config, machines, deps.kubeConfig)]);
  rows.push(...plugRows, ...clusterRows);
  const ok = rows.every((r) => r.status !== "FAIL");
  return { ok, rows, text: render(rows, ok) };
}

async function checkPlugs(config: AppConfig, machines: readonly Machine[], deps: DoctorDeps): Promise<Row[]> {
  const probe =
    deps.probe ??
    ((plug: PlugAddress) =>
      createEsphomePowerSwitch({
        timeoutMs: config.plugTimeoutMs,
        ...(config.credentials && {
          credentials: { username: config.credentials.username.reveal(), password: config.credentials.password.reveal() },
        }),
      }).probe(plug));
  return Promise.all(
    machines.map(async (m): Promise<Row> => {
      const subject = `${m.name} (${m.plug.url} "${m.plug.switch}")`;
      try {
        const p = await probe(m.plug);
        const watts = p.watts === undefined ? "" : `, ${p.watts} W`;
        const detail = `${p.state}; entity by ${p.urlStyle === "name" ? "name (ESPHome 2026.1+)" : "object_id (before 2026.1)"}; auth ${p.auth}${watts}`;
        if (p.sensorError !== undefined) return { area: "plug", subject, status: "warn", detail: `${detail}; power sensor: ${p.sensorError}` };
        return { area: "plug", subject, status: "ok", detail: m.hold ? `${detail}; held` : detail };
      } catch (e) {
        return { area: "plug", subject, status: "FAIL", detail: e instanceof Error ? e.message : String(e) };
      }
    }),
  );
}

async function checkCluster(config: AppConfig, machines: readonly Machine[], kc: KubeConfig): Promise<Row[]> {
  const namespace = config.powerOffPod.namespace;
  try {
    const version = await kc.makeApiClient(VersionApi).getCode();
    const rows: Row[] = [{ area: "cluster", subject: kc.getCurrentCluster()?.server ?? "apiserver", status: "ok", detail: `kube-apiserver ${version.gitVersion}` }];
    rows.push(...(await checkAccess(kc, namespace)));
    rows.push(...(await checkNamespace(config, kc, machines[0])));
    rows.push(...(await checkNodes(config, kc, machines)));
    return rows;
  } catch (e) {
    return [{ area: "cluster", subject: "apiserver", status: "FAIL", detail: `cannot reach the apiserver: ${apiserverReason(e)}` }];
  }
}

async function checkAccess(kc: KubeConfig, namespace: string): Promise<Row[]> {
  const api = kc.makeApiClient(AuthorizationV1Api);
  const results = await Promise.all(
    requiredAccess(namespace).map(async (a) => {
      const review = await api.createSelfSubjectAccessReview({
        body: { spec: { resourceAttributes: { verb: a.verb, resource: a.resource, group: a.group, namespace: a.namespace } } },
      });
      const where = a.namespace === "" ? "" : ` in ${a.namespace}`;
      return { what: `${a.verb} ${a.group === "" ? "" : `${a.group}/`}${a.resource}${where}`, allowed: review.status?.allowed === true };
    }),
  );
  const denied = results.filter((r) => !r.allowed).map((r) => r.what);
  return [
    denied.length === 0
      ? { area: "cluster", subject: "permissions", status: "ok", detail: `all ${results.length} needed permissions granted` }
      : { area: "cluster", subject: "permissions", status: "FAIL", detail: `missing: ${denied.join(", ")}` },
  ];
}

async function checkNamespace(config: AppConfig, kc: KubeConfig, machine: Machine | undefined): Promise<Row[]> {
  const { namespace, image } = config.powerOffPod;
  const core = kc.makeApiClient(CoreV1Api);
  const subject = `power-off namespace ${namespace}`;
  try {
    await core.readNamespace({ name: namespace });
  } catch (e) {
    return [{ area: "cluster", subject, status: "FAIL", detail: `cannot read it: ${apiserverReason(e)}` }];
  }
  if (machine === undefined) return [];
  // A dry run goes through admission (Pod Security included) and stores nothing.
  const pod = powerOffPodManifest({ namespace, image, machine: machine.name, nodeName: machine.name, startedAt: 0 });
  try {
    await core.createNamespacedPod({ namespace, body: pod, dryRun: "All" });
    return [{ area: "cluster", subject, status: "ok", detail: "admits the privileged power-off pod (dry run)" }];
  } catch (e) {
    return [{ area: "cluster", subject, status: "FAIL", detail: `refuses the power-off pod: ${apiserverReason(e)}` }];
  }
}

async function checkNodes(config: AppConfig, kc: KubeConfig, machines: readonly Machine[]): Promise<Row[]> {
  const nodes = (await kc.makeApiClient(CoreV1Api).listNode()).items;
  const prefix = config.pool.providerIDPrefix;
  return machines.map((m): Row => {
    const expected = prefix + m.name;
    const byName = nodes.find((n) => n.metadata?.name === m.name);
    const byProviderID = nodes.find((n) => n.spec?.providerID === expected);
    const subject = `node ${m.name}`;
    if (byName !== undefined && (byName.spec?.providerID ?? "") !== "" && byName.spec?.providerID !== expected) {
      return { area: "cluster", subject, status: "FAIL", detail: `providerID is "${byName.spec?.providerID ?? ""}", expected "${expected}" (set providerIDPrefix or the kubelet's --provider-id)` };
    }
    const node = byProviderID ?? byName;
    if (node === undefined) return { area: "cluster", subject, status: "ok", detail: "not registered (powered off or booting)" };
    const ready = node.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
    const how = node === byProviderID ? "providerID" : "name (no providerID)";
    return { area: "cluster", subject, status: "ok", detail: `registered as ${node.metadata?.name ?? ""}, matched by ${how}, ${ready ? "Ready" : "NotReady"}` };
  });
}

function render(rows: readonly Row[], ok: boolean): string {
  const headers = ["AREA", "SUBJECT", "STATUS", "DETAIL"];
  const cells = rows.map((r) => [r.area, r.subject, r.status, r.detail]);
  const widths = headers.slice(0, 3).map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? "").length)));
  const line = (c: readonly string[]) =>
    c.map((v, i) => (i < 3 ? v.padEnd(widths[i] ?? 0) : v)).join("  ").trimEnd();
  const failures = rows.filter((r) => r.status === "FAIL").length;
  const summary = ok ? "\nall checks passed\n" : `\n${failures} check(s) failed\n`;
  return [line(headers), ...cells.map(line)].join("\n") + summary;
}
