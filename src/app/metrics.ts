import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Instance, InstanceState, MachineUsage, Pool, PoolConfig, PoolEvent } from "../domain/index.ts";
import { isPlugpoolError } from "../domain/index.ts";

/** The PoolEvents counted in plugpool_power_actions_total, as its `action` label. */
export const POWER_ACTIONS = [
  "powered-on",
  "power-on-queued",
  "power-on-failed",
  "power-restored",
  "quarantined",
  "power-off-started",
  "plug-off",
  "node-deleted",
  "power-off-finished",
  "power-off-aborted",
  "refused",
  "hard-cut",
  "powered-outside",
  "revived",
  "stranded",
] as const satisfies readonly PoolEvent["type"][];
export type PowerAction = (typeof POWER_ACTIONS)[number];

/** Every metric plugpool exports, on one registry (served at /metrics). */
export interface Metrics {
  readonly registry: Registry;
  readonly rpcDuration: Histogram<"method" | "code">;
  readonly plugRequests: Counter<"machine" | "operation" | "result">;
  /** Every group's count of every action is exported from the start, at 0 until it happens (see observePool). */
  readonly powerActions: Counter<"group" | "action">;
  readonly powerOffStepDuration: Histogram<"step">;
  readonly graceEnded: Counter<"how">;
  readonly powerOnToReady: Histogram<"group">;
  readonly configErrors: Counter<"kind">;
  readonly eventErrors: Counter;
  readonly watchErrors: Counter;
  readonly recordConflicts: Counter;
  /** Wires the instances gauge and the energy metrics to the pool (read at scrape time, not maintained). */
  observePool(pool: Pool, config: PoolConfig): void;
  /** Wires the cluster-view gauge to the view's health (read at scrape time). */
  observeView(current: () => boolean): void;
}

/** What the scrape-time gauges read: nothing until observePool and observeView wire the pool and the view. */
interface Observed {
  source?: { readonly pool: Pool; readonly config: PoolConfig };
  viewCurrent?: () => boolean;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "plugpool_" });
  const registers = [registry];
  const observed: Observed = {};
  poolGauges(registers, observed);
  viewGauge(registers, observed);
  energyMetrics(registers, () => observed.source?.pool.usage() ?? []);
  const power = powerMetrics(registers);
  return {
    registry,
    ...callMetrics(registers),
    ...power,
    ...clusterMetrics(registers),
    observePool(pool, config) {
      observed.source = { pool, config };
      // A counter's label set appears at its first increment otherwise, and Prometheus' increase() cannot see a
      // series' first sample: the first refusal of a group would never raise an alert.
      for (const group of config.groups) {
        for (const action of POWER_ACTIONS) power.powerActions.inc({ group: group.id, action }, 0);
      }
    },
    observeView(current) {
      observed.viewCurrent = current;
    },
  };
}

/** The machines and instances as the pool reports them, each read at scrape time (none until observePool). */
function poolGauges(registers: Registry[], observed: Observed): void {
  new Gauge({
    name: "plugpool_powered_outside_machines",
    help: "Machines whose plug is on with no Node and no record of plugpool switching them on: left alone, never cut.",
    labelNames: ["machine"],
    registers,
    collect() {
      this.reset();
      for (const machine of observed.source?.pool.poweredOutside() ?? []) this.set({ machine }, 1);
    },
  });
  new Gauge({
    name: "plugpool_device_mismatch_machines",
    help: "Machines whose power device answered as another device right before a switch command: held, nothing switched, until the identity of their device is pinned in the configuration.",
    labelNames: ["machine"],
    registers,
    collect() {
      this.reset();
      for (const { machine } of observed.source?.pool.deviceMismatches() ?? []) this.set({ machine }, 1);
    },
  });
  new Gauge({
    name: "plugpool_instances",
    help: "Instances reported to cluster-autoscaler, by group and state.",
    labelNames: ["group", "state"],
    registers,
    collect() {
      this.reset();
      const { source } = observed;
      if (!source) return;
      for (const group of source.config.groups) {
        const counts: Record<InstanceState, number> = { creating: 0, running: 0, deleting: 0 };
        for (const i of instancesOf(source.pool, group.id)) counts[i.state] += 1;
        for (const [state, n] of Object.entries(counts)) this.set({ group: group.id, state }, n);
      }
    },
  });
  new Gauge({
    name: "plugpool_quarantined_machines",
    help: "Machines left out of scale-ups after failed boots, with the failures in a row as the value.",
    labelNames: ["machine"],
    registers,
    collect() {
      this.reset();
      for (const q of observed.source?.pool.quarantine() ?? []) this.set({ machine: q.machine }, q.failures);
    },
  });
}

/** The cluster view's health, read at scrape time (0 until observeView). */
function viewGauge(registers: Registry[], observed: Observed): void {
  new Gauge({
    name: "plugpool_cluster_view_current",
    help: "1 while the cluster view's watches have heard from the apiserver recently; while 0 no power is cut.",
    registers,
    collect() {
      this.set(observed.viewCurrent === undefined ? 0 : Number(observed.viewCurrent()));
    },
  });
}

/** The calls plugpool answers (cluster-autoscaler's gRPC) and makes (reads and switch commands to the plugs). */
function callMetrics(registers: Registry[]): Pick<Metrics, "rpcDuration" | "plugRequests"> {
  return {
    rpcDuration: new Histogram({
      name: "plugpool_rpc_duration_seconds",
      help: "gRPC calls from cluster-autoscaler, by method and status code.",
      labelNames: ["method", "code"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5],
      registers,
    }),
    plugRequests: new Counter({
      name: "plugpool_plug_requests_total",
      help: "Plug reads and switch commands, by machine, operation and result (ok or an error code).",
      labelNames: ["machine", "operation", "result"],
      registers,
    }),
  };
}

/** What plugpool did with the power: its actions, how its power-offs went, how long its power-ons took to boot. */
function powerMetrics(registers: Registry[]): Pick<Metrics, "powerActions" | "powerOffStepDuration" | "graceEnded" | "powerOnToReady"> {
  return {
    powerActions: new Counter({
      name: "plugpool_power_actions_total",
      help: `Power actions by group and action (${POWER_ACTIONS.join(", ")}).`,
      labelNames: ["group", "action"],
      registers,
    }),
    powerOffStepDuration: new Histogram({
      name: "plugpool_power_off_step_duration_seconds",
      help: "Time each power-off step took from first entered to done.",
      labelNames: ["step"],
      buckets: [0.1, 1, 5, 15, 30, 60, 120, 300, 600],
      registers,
    }),
    graceEnded: new Counter({
      name: "plugpool_power_off_grace_ended_total",
      help: "How the grace before a plug-off ended: elapsed (full wait) or standby (the power sensor saw the machine off).",
      labelNames: ["how"],
      registers,
    }),
    powerOnToReady: new Histogram({
      name: "plugpool_power_on_to_ready_seconds",
      help: "From plugpool switching a plug on for a scale-up to the machine's Node turning Ready, by group.",
      labelNames: ["group"],
      buckets: [1, 5, 10, 15, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900],
      registers,
    }),
  };
}

/** Trouble met in the cluster: Nodes that contradict the configuration, and failed writes and watches of the apiserver. */
function clusterMetrics(registers: Registry[]): Pick<Metrics, "configErrors" | "eventErrors" | "watchErrors" | "recordConflicts"> {
  return {
    configErrors: new Counter({
      name: "plugpool_config_errors_total",
      help: "Configuration problems seen at run time (e.g. a Node named like a machine with another providerID).",
      labelNames: ["kind"],
      registers,
    }),
    eventErrors: new Counter({
      name: "plugpool_kubernetes_event_errors_total",
      help: "Kubernetes Events that could not be written.",
      registers,
    }),
    watchErrors: new Counter({
      name: "plugpool_kubernetes_watch_errors_total",
      help: "Failed lists and watches of the cluster view (each is retried with backoff).",
      registers,
    }),
    recordConflicts: new Counter({
      name: "plugpool_records_conflicts_total",
      help: "Writes of plugpool's records that found another writer's change to the ConfigMap (409 Conflict): another plugpool acted.",
      registers,
    }),
  };
}

/**
 * Per machine: plug on/off, the sensor's watts, and the totals the pool keeps (time powered on, energy used and
 * avoided). Each is read from the pool at scrape time; a series is absent while its value is unknown (a plug never
 * read, no sensor, no idleWatts), never a made-up 0. The totals start from 0 when plugpool starts.
 */
function energyMetrics(registers: Registry[], usage: () => readonly MachineUsage[]): void {
  const labelNames = ["group", "machine"] as const;
  new Gauge({
    name: "plugpool_plug_on",
    help: "1 while the machine's plug reads on, 0 while off; absent until the plug was read and after an unconfirmed switch.",
    labelNames,
    registers,
    collect() {
      this.reset();
      for (const u of usage()) if (u.plug !== "unknown") this.set({ group: u.group, machine: u.machine }, Number(u.plug === "on"));
    },
  });
  new Gauge({
    name: "plugpool_machine_power_watts",
    help: "The machine's draw as the plug's power sensor last read it; only for plugs with powerSensor.",
    labelNames,
    registers,
    collect() {
      this.reset();
      for (const u of usage()) if (u.watts !== undefined) this.set({ group: u.group, machine: u.machine }, u.watts);
    },
  });
  const total = (name: string, help: string, value: (u: MachineUsage) => number | undefined) =>
    new Counter({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        for (const u of usage()) {
          const v = value(u);
          if (v !== undefined) this.inc({ group: u.group, machine: u.machine }, v);
        }
      },
    });
  total(
    "plugpool_machine_powered_on_seconds_total",
    "Seconds the machine's plug was on, between plugpool's readings of it since plugpool started.",
    (u) => u.poweredOnSeconds,
  );
  total(
    "plugpool_machine_energy_used_kwh_total",
    "Energy the machine drew, integrated from its power sensor's readings (trapezoids between reads); only for plugs with powerSensor.",
    (u) => u.energyUsedKwh,
  );
  total(
    "plugpool_machine_energy_avoided_kwh_total",
    "Time the machine's plug was off times its group's idleWatts: the energy it would have drawn idling; only with idleWatts.",
    (u) => u.energyAvoidedKwh,
  );
}

/** The group's instances; none while this plugpool is passive (another instance reports them). */
function instancesOf(pool: Pool, groupId: string): readonly Instance[] {
  try {
    return pool.instances(groupId);
  } catch (error) {
    if (isPlugpoolError(error) && error.code === "not-leader") return [];
    throw error;
  }
}
