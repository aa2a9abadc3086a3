// Embedding plugpool's domain in another tool: a pool of two machines driven through a scale-up and a
// scale-down with in-memory ports only (no plugs, no cluster, no network). It imports nothing but the
// package's public subpath, as a dependency would. Run it after `npm run build`:
//
//   node examples/in-memory-pool.ts
//
// Each line it prints is one thing the pool reported or one thing the simulated site did.
import {
  createPool,
  formatPowerOffRecord,
  POWER_OFF_ANNOTATION,
  PlugpoolError,
  TO_BE_DELETED_TAINT,
  type ClusterView,
  type Machine,
  type NodeLookup,
  type NodeTeardown,
  type NodeView,
  type PoolConfig,
  type PoolEvent,
  type PowerOffPodView,
  type PowerOffRecord,
  type PowerOnRecord,
  type PowerRecords,
  type PowerSwitch,
  type QuarantineRecord,
} from "plugpool/domain";

const PREFIX = "example://";
const MINUTE = 60_000;

/** Time moves only when the example says so. */
let now = Date.parse("2026-12-01T08:00:00Z");
const start = now;
// Nothing steps the example's wall clock, so time since its start serves as the monotonic reading.
const clock = { now: () => now, monotonic: () => now - start };
const log = (line: string): void => {
  console.log(`${new Date(now).toISOString().slice(11, 19)} ${line}`);
};

/** The site: which plugs are on, which Nodes and power-off pods the cluster holds. */
const plugs = new Map<string, boolean>();
const nodes = new Map<string, NodeView>();
const pods = new Map<string, PowerOffPodView>();

const power: PowerSwitch = {
  read: (control) => Promise.resolve({ on: plugs.get(control.key) ?? false }),
  turnOn: (control) => {
    plugs.set(control.key, true);
    return Promise.resolve({ on: true });
  },
  // The guard is asked last, right before the relay would switch: a real plug adapter does the same.
  turnOff: async (control, mayCut) => {
    if (!(await mayCut())) throw new PlugpoolError("unsafe", `refused to switch off ${control.label}`);
    plugs.set(control.key, false);
    return { on: false };
  },
};

const cluster: ClusterView = {
  nodeNamed: (name) => nodes.get(name),
  nodesWithProviderID: (id) => [...nodes.values()].filter((n) => n.providerID === id),
  nodesCreatedAfter: (at) => [...nodes.values()].filter((n) => n.createdAt === undefined || n.createdAt > at),
  powerOffPod: (machine) => pods.get(machine),
  templateSlices: () => undefined,
  current: () => true,
};

const lookup: NodeLookup = {
  nodesClaiming: (name, providerID) =>
    Promise.resolve([...nodes.values()].filter((n) => n.name === name || n.providerID === providerID)),
  // The view above is the cluster itself: never behind.
  viewCaughtUp: () => Promise.resolve(),
};

const powerOns = new Map<string, PowerOnRecord>();
const quarantines = new Map<string, QuarantineRecord>();
const identities = new Map<string, string>();
const records: PowerRecords = {
  powerOn: (machine) => powerOns.get(machine),
  recordPowerOn: (machine, record) => {
    powerOns.set(machine, record);
    return Promise.resolve();
  },
  endPowerOn: (machine) => {
    powerOns.delete(machine);
  },
  quarantine: (machine) => quarantines.get(machine),
  setQuarantine: (machine, record) => {
    if (record === undefined) quarantines.delete(machine);
    else quarantines.set(machine, record);
  },
  deviceIdentity: (machine) => identities.get(machine),
  recordDeviceIdentity: (machine, id) => {
    identities.set(machine, id);
    return Promise.resolve();
  },
  // Kept in memory only: every change is as stored as it will ever be.
  stored: () => Promise.resolve(),
};

/** Sets (or with undefined, removes) the power-off mark on a Node, as the apiserver would. */
const mark = (name: string, record: PowerOffRecord | undefined): Promise<void> => {
  const node = nodes.get(name);
  if (node !== undefined) {
    const others = Object.entries(node.annotations).filter(([key]) => key !== POWER_OFF_ANNOTATION);
    if (record !== undefined) others.push([POWER_OFF_ANNOTATION, formatPowerOffRecord(record)]);
    const annotations = Object.fromEntries(others);
    nodes.set(name, { ...node, annotations });
  }
  return Promise.resolve();
};

const teardown: NodeTeardown = {
  markPowerOff: (name, record) => mark(name, record),
  clearPowerOffMark: (name) => mark(name, undefined),
  createPowerOffPod: (machine: Machine, nodeName, startedAt) => {
    pods.set(machine.name, { machine: machine.name, nodeName, startedAt, phase: "Running", terminating: false });
    log(`site: power-off pod runs on ${nodeName}; its OS shuts down`);
    const node = nodes.get(nodeName);
    if (node !== undefined) nodes.set(nodeName, { ...node, ready: false, readyChangedAt: now });
    return Promise.resolve();
  },
  deletePowerOffPod: (machine: Machine) => {
    pods.delete(machine.name);
    return Promise.resolve(true);
  },
  deleteNode: (name, uid) => {
    if (nodes.get(name)?.uid === uid) nodes.delete(name);
    return Promise.resolve();
  },
};

const describe = (e: PoolEvent): string => {
  const fields = Object.entries(e)
    .filter(([k]) => k !== "type")
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : String(v)}`);
  return `pool: ${e.type} ${fields.join(" ")}`;
};

// The pool never looks inside a power control: the tool's own backend resolves the key.
const control = (key: string) => ({ backend: "in-memory", key, label: `switch ${key}`, measuresWatts: false });
const config: PoolConfig = {
  providerIDPrefix: PREFIX,
  gpuLabel: "example.com/gpu",
  gpuTypes: [],
  powerOff: {
    notReadyTimeoutMs: 5 * MINUTE,
    onShutdownTimeout: "keep-power",
    maxPodAttempts: 3,
    graceMs: 2 * MINUTE,
    standbyWatts: 5,
    standbyWindowMs: 30_000,
    retryMs: 1_000,
    maxRetryMs: 60_000,
  },
  groups: [
    {
      id: "gpu",
      minSize: 0,
      maxSize: 2,
      template: { cpu: "16", memory: "64Gi", pods: "110", resources: {}, labels: {}, taints: [] },
      machines: [
        { name: "box-1", group: "gpu", power: control("plug-1.lan"), index: 0, hold: false },
        { name: "box-2", group: "gpu", power: control("plug-2.lan"), index: 1, hold: false },
      ],
    },
  ],
};

const pool = createPool(
  { clock, power, cluster, lookup, teardown, records, reporter: { report: (e) => { log(describe(e)); } } },
  config,
);

/** Runs the pool's background reconciliation until it has nothing left to do now. */
async function settle(): Promise<void> {
  for (let pass = 0; pass < 20; pass++) {
    const again = await pool.reconcile();
    if (again === undefined || again > 0) return;
  }
}

const state = () => JSON.stringify(pool.instances("gpu").map((i) => `${i.id}:${i.state}`));

await pool.refresh();
log(`cluster-autoscaler asks for one machine more; instances ${state()}`);
await pool.increaseSize("gpu", 1);
log(`instances ${state()}; plugs ${JSON.stringify(Object.fromEntries(plugs))}`);

now += 2 * MINUTE;
nodes.set("box-1", { name: "box-1", uid: "box-1-1", providerID: `${PREFIX}box-1`, ready: true, readyChangedAt: now, taints: [], annotations: {}, labels: {} });
pool.clusterChanged();
log(`site: box-1 booted and registered its Node; instances ${state()}`);

now += 30 * MINUTE;
const node = nodes.get("box-1");
if (node === undefined) throw new Error("box-1 has no Node");
nodes.set("box-1", { ...node, taints: [{ key: TO_BE_DELETED_TAINT, value: String(now / 1000), effect: "NoSchedule" }] });
pool.clusterChanged();
log("cluster-autoscaler found box-1 unneeded, drained and tainted it, and deletes it");
await pool.deleteNodes("gpu", [{ name: "box-1", providerID: `${PREFIX}box-1` }]);
await settle();

for (let minute = 0; minute < 4 && nodes.has("box-1"); minute++) {
  now += MINUTE;
  pool.clusterChanged();
  await settle();
}
pool.clusterChanged();
await settle();
log(`done: instances ${state()}; plugs ${JSON.stringify(Object.fromEntries(plugs))}; nodes ${JSON.stringify([...nodes.keys()])}`);
