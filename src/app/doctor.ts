// `plugpool doctor`: checks the configuration, every plug and the cluster access plugpool needs, and prints
// one table. It changes nothing: plugs are only read, and the power-off pod is only tried with dryRun=All.
// Each check reports on its own, so one refusal (say, no right to list Nodes) never hides the others.
import { AuthenticationV1Api, AuthorizationV1Api, CoreV1Api, VersionApi, type KubeConfig } from "@kubernetes/client-node";
import type { Machine, PowerControl } from "../domain/index.ts";
import type { BackendProbe } from "../adapters/power-backend.ts";
import { apiserverReason, redactUserinfo, statusOf } from "../adapters/kubernetes/api-errors.ts";
import { powerOffPodManifest } from "../adapters/kubernetes/power-off-pod.ts";
import { requiredAccess, type LeaseAccess } from "../adapters/kubernetes/access.ts";
import { POWER_RECORDS_CONFIGMAP, recordKey } from "../adapters/kubernetes/power-records.ts";
import type { AppConfig } from "./config/index.ts";
import { checkRunningInstance } from "./doctor-running.ts";
import { compareWithTemplate } from "./doctor-template.ts";
import { createPowerSwitch } from "./power/power-switch.ts";
import { messageOf } from "../domain/errors.ts";
import { renderTable } from "./table.ts";

type Status = "ok" | "warn" | "FAIL";

interface Row {
  readonly area: string;
  readonly subject: string;
  status: Status;
  detail: string;
}

export interface DoctorReport {
  /** No check failed (warnings allowed). */
  readonly ok: boolean;
  readonly rows: readonly Row[];
  readonly text: string;
}

export interface DoctorDeps {
  readonly kubeConfig: KubeConfig;
  /** How power controls are probed; defaults to each one's backend with the configured timeout and secrets. */
  readonly probe?: (control: PowerControl) => Promise<BackendProbe>;
}



export async function doctor(config: AppConfig, deps: DoctorDeps): Promise<DoctorReport> {
  const machines = config.pool.groups.flatMap((g) => g.machines);
  const rows: Row[] = [
    {
      area: "config",
      subject: "file",
      status: "ok",
      detail: `${config.pool.groups.length} group(s), ${machines.length} machine(s); gRPC on ${config.listen.host}:${config.listen.port}${config.tls ? " (mTLS)" : ""}; power by ${powerBackends(machines)}`,
    },
    ...config.warnings.map((detail): Row => ({ area: "config", subject: "file", status: "warn", detail })),
  ];
  const poweredOn = new Set<string>();
  const identities = new Map<string, string>();
  const [plugRows, clusterRows, runningRows] = await Promise.all([
    checkPlugs(config, machines, deps, poweredOn, identities),
    checkCluster(config, machines, deps.kubeConfig),
    checkRunningInstance(config),
  ]);
  const records = await readRecords(config, deps.kubeConfig);
  markPoweredOutside(records, poweredOn, clusterRows);
  rows.push(...plugRows, ...checkDevices(machines, identities, records), ...clusterRows, ...runningRows);
  const ok = rows.every((r) => r.status !== "FAIL");
  return { ok, rows, text: render(rows, ok) };
}

function defaultProbe(config: AppConfig): (control: PowerControl) => Promise<BackendProbe> {
  // One switch for all controls, so that those of one device are asked one at a time, as in `serve`.
  const power = createPowerSwitch(config.powerControls, config.deviceTimeoutsMs);
  return (control) => power.probe(control);
}

/** "esphome (3), redfish (1)": how many machines each backend powers. */
function powerBackends(machines: readonly Machine[]): string {
  const counts = new Map<string, number>();
  for (const m of machines) counts.set(m.power.backend, (counts.get(m.power.backend) ?? 0) + 1);
  return [...counts].map(([backend, n]) => `${backend} (${n})`).join(", ");
}

async function checkPlugs(
  config: AppConfig,
  machines: readonly Machine[],
  deps: DoctorDeps,
  poweredOn: Set<string>,
  identities: Map<string, string>,
): Promise<Row[]> {
  const probe = deps.probe ?? defaultProbe(config);
  return Promise.all(
    machines.map(async (m): Promise<Row> => {
      const subject = `${m.name} (${m.power.label})`;
      try {
        const p = await probe(m.power);
        if (p.state === "on") poweredOn.add(m.name);
        if (p.identity !== undefined) identities.set(m.name, p.identity.id);
        const watts = p.watts === undefined ? "" : `, ${p.watts} W`;
        const detail = `${p.state}; ${p.detail}${watts}`;
        if (p.sensorError !== undefined) return { area: "plug", subject, status: "warn", detail: `${detail}; power sensor: ${p.sensorError}` };
        return { area: "plug", subject, status: "ok", detail: m.hold ? `${detail}; held` : detail };
      } catch (e) {
        return { area: "plug", subject, status: "FAIL", detail: messageOf(e) };
      }
    }),
  );
}

async function checkCluster(config: AppConfig, machines: readonly Machine[], kc: KubeConfig): Promise<Row[]> {
  const server = redactUserinfo(kc.getCurrentCluster()?.server ?? "apiserver");
  let version: string;
  try {
    version = (await kc.makeApiClient(VersionApi).getCode()).gitVersion;
  } catch (e) {
    return [{ area: "cluster", subject: server, status: "FAIL", detail: `cannot reach the apiserver: ${apiserverReason(e)}` }];
  }
  const [user, ...checks] = await Promise.all([
    whoAmI(kc),
    checkAccess(kc, config.powerOffPod.namespace, leaseAccess(config)),
    checkPowerOffNamespace(config, kc, machines[0]),
    checkNodes(config, kc, machines),
  ]);
  const as = user === undefined ? "" : `, as ${user}`;
  return [{ area: "cluster", subject: server, status: "ok", detail: `kube-apiserver ${version}${as}` }, ...checks.flat()];
}

/** The identity the checks run as: a kubeconfig with more rights than the pod's ServiceAccount passes more. */
async function whoAmI(kc: KubeConfig): Promise<string | undefined> {
  try {
    const review = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    return review.status?.userInfo?.username;
  } catch {
    return undefined; // informational only
  }
}

/**
 * plugpool's Lease, and cluster-autoscaler's where the config names its namespace (else it is the namespace of the
 * pod `serve` runs in, which doctor does not know).
 */
function leaseAccess(config: AppConfig): LeaseAccess {
  const follow = config.leaderElection.followAutoscaler;
  const namespace = follow === false ? undefined : follow.namespace;
  return {
    lease: config.leaderElection.lease,
    ...(follow !== false && namespace !== undefined && { autoscaler: { namespace, name: follow.name } }),
  };
}

async function checkAccess(kc: KubeConfig, namespace: string, leases: LeaseAccess): Promise<Row[]> {
  const api = kc.makeApiClient(AuthorizationV1Api);
  const subject = "permissions";
  try {
    const results = await Promise.all(
      requiredAccess(namespace, leases).map(async (a) => {
        const review = await api.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: { ...a } } } });
        const resource = `${a.group === undefined ? "" : `${a.group}/`}${a.resource}${a.name === undefined ? "" : ` ${a.name}`}`;
        return { what: `${a.verb} ${resource}${a.namespace === undefined ? "" : ` in ${a.namespace}`}`, allowed: review.status?.allowed === true };
      }),
    );
    const denied = results.filter((r) => !r.allowed).map((r) => r.what);
    return [
      denied.length === 0
        ? { area: "cluster", subject, status: "ok", detail: `all ${results.length} needed permissions granted` }
        : { area: "cluster", subject, status: "FAIL", detail: `missing: ${denied.join(", ")}` },
    ];
  } catch (e) {
    return [{ area: "cluster", subject, status: "FAIL", detail: `cannot check them: ${apiserverReason(e)}` }];
  }
}

async function checkPowerOffNamespace(config: AppConfig, kc: KubeConfig, machine: Machine | undefined): Promise<Row[]> {
  const { namespace, image } = config.powerOffPod;
  const subject = `power-off namespace ${namespace}`;
  if (machine === undefined) return [];
  // A dry run goes through authorization and admission (Pod Security included) and stores nothing.
  const pod = powerOffPodManifest({ namespace, image, machine: machine.name, nodeName: machine.name, startedAt: 0 });
  try {
    await kc.makeApiClient(CoreV1Api).createNamespacedPod({ namespace, body: pod, dryRun: "All" });
    return [{ area: "cluster", subject, status: "ok", detail: "admits the privileged power-off pod (dry run)" }];
  } catch (e) {
    const reason = apiserverReason(e);
    const status = statusOf(e);
    const detail =
      status === 404 ? `does not exist: ${reason}`
      : status === 403 && reason.includes("PodSecurity") ? `refuses privileged pods (label it pod-security.kubernetes.io/enforce=privileged): ${reason}`
      : `refuses the power-off pod (dry run): ${reason}`;
    return [{ area: "cluster", subject, status: "FAIL", detail }];
  }
}

async function checkNodes(config: AppConfig, kc: KubeConfig, machines: readonly Machine[]): Promise<Row[]> {
  let nodes;
  try {
    nodes = (await kc.makeApiClient(CoreV1Api).listNode()).items;
  } catch (e) {
    return [{ area: "cluster", subject: "nodes", status: "FAIL", detail: `cannot list Nodes: ${apiserverReason(e)}` }];
  }
  const prefix = config.pool.providerIDPrefix;
  return machines.flatMap((m): Row[] => {
    const expected = prefix + m.name;
    const byName = nodes.find((n) => n.metadata?.name === m.name);
    const byProviderID = nodes.find((n) => n.spec?.providerID === expected);
    const subject = `node ${m.name}`;
    if (byName !== undefined && (byName.spec?.providerID ?? "") !== "" && byName.spec?.providerID !== expected) {
      return [{ area: "cluster", subject, status: "FAIL", detail: `providerID is "${byName.spec?.providerID ?? ""}", expected "${expected}" (set providerIDPrefix or the kubelet's --provider-id)` }];
    }
    const node = byProviderID ?? byName;
    if (node === undefined) return [{ area: "cluster", subject, status: "ok", detail: NOT_REGISTERED }];
    const ready = node.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
    const how = node === byProviderID ? "providerID" : "name (no providerID)";
    const group = config.pool.groups.find((g) => g.id === m.group);
    return [
      { area: "cluster", subject, status: "ok", detail: `registered as ${node.metadata?.name ?? ""}, matched by ${how}, ${ready ? "Ready" : "NotReady"}` },
      ...(group === undefined ? [] : [compareWithTemplate(group, node)]),
    ];
  });
}

const NOT_REGISTERED = "not registered (powered off or booting)";

/** plugpool's records ConfigMap as stored, or why it could not be read (a missing one holds no records). */
type Records = { readonly data: Readonly<Record<string, string>> } | { readonly error: string };

async function readRecords(config: AppConfig, kc: KubeConfig): Promise<Records> {
  try {
    const map = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ name: POWER_RECORDS_CONFIGMAP, namespace: config.powerOffPod.namespace });
    return { data: map.data ?? {} };
  } catch (e) {
    return statusOf(e) === 404 ? { data: {} } : { error: apiserverReason(e) };
  }
}

/**
 * A plug that is on under no Node is booting only if plugpool switched it on (its record in the records
 * ConfigMap); otherwise someone else powered the machine: plugpool leaves it alone, and doctor says so as a failure.
 */
function markPoweredOutside(records: Records, poweredOn: ReadonlySet<string>, rows: Row[]): void {
  const unregistered = rows.filter((r) => r.detail === NOT_REGISTERED && poweredOn.has(r.subject.slice("node ".length)));
  for (const row of unregistered) {
    if ("error" in records) {
      row.status = "warn";
      row.detail = `plug on, no Node; plugpool's records could not be read: ${records.error}`;
      continue;
    }
    const machine = row.subject.slice("node ".length);
    const recorded = records.data[recordKey("power-on", machine)] !== undefined;
    row.status = recorded ? "ok" : "FAIL";
    row.detail = recorded
      ? "plug on, not registered yet: booting (switched on by plugpool)"
      : "plug on with no Node and no record of plugpool switching it on: powered outside plugpool (by hand, or its Node registered under another name); plugpool never switches it off";
  }
}

/**
 * What each device answers as now, against what plugpool expects of it (pinned in the configuration, else learned
 * at its first switch command and kept with the records): a device that answers as another holds its machine, and
 * two devices that answer alike cannot be told apart.
 */
function checkDevices(machines: readonly Machine[], identities: ReadonlyMap<string, string>, records: Records): Row[] {
  return machines.flatMap((m): Row[] => {
    const seen = identities.get(m.name);
    if (seen === undefined) return [];
    const subject = `device of ${m.name}`;
    const twin = machines.find((o) => o !== m && identities.get(o.name) === seen);
    if (twin !== undefined) {
      return [{ area: "device", subject, status: "warn", detail: `answers as ${seen}, as the device of ${twin.name} does: plugpool cannot tell them apart (give each device a name of its own)` }];
    }
    const learned = "error" in records ? undefined : learnedIdentity(records.data, m.name);
    const expected = m.power.identity ?? learned;
    const how = m.power.identity === undefined ? "learned" : "pinned";
    if (expected === undefined) {
      const unread = "error" in records ? `; plugpool's records could not be read: ${records.error}` : "";
      return [{ area: "device", subject, status: unread === "" ? "ok" : "warn", detail: `answers as ${seen}; not met yet: learned at the first switch command${unread}` }];
    }
    if (expected === seen) return [{ area: "device", subject, status: "ok", detail: `answers as ${seen} (${how})` }];
    return [{
      area: "device",
      subject,
      status: "FAIL",
      detail: `answers as ${seen}, but plugpool knows it as ${expected} (${how}): nothing is switched and ${m.name} is held; fix the address, or if the device was replaced set deviceIdentity: ${JSON.stringify(seen)} on the node`,
    }];
  });
}

function learnedIdentity(data: Readonly<Record<string, string>>, machine: string): string | undefined {
  const json = data[recordKey("device", machine)];
  if (json === undefined) return undefined;
  try {
    const id = (JSON.parse(json) as { id?: unknown }).id;
    return typeof id === "string" ? id : undefined;
  } catch {
    return undefined;
  }
}

function render(rows: readonly Row[], ok: boolean): string {
  const headers = ["AREA", "SUBJECT", "STATUS", "DETAIL"];
  const cells = rows.map((r) => [r.area, r.subject, r.status, r.detail]);
  const failures = rows.filter((r) => r.status === "FAIL").length;
  const summary = ok ? "\nall checks passed\n" : `\n${failures} check(s) failed\n`;
  return renderTable(headers, cells, ["left", "left", "left", "free"]) + summary;
}
