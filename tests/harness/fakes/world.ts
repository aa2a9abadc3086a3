// A pool wired to fakes, with a small configuration builder, for the domain tests.
import type {
  Leadership,
  Machine,
  NodeGroupSpec,
  NodeTemplate,
  Pool,
  PoolConfig,
  PoolDeps,
  PowerOffSettings,
  QuarantineSettings,
  ScaleUpSettings,
} from "../../../src/domain/index.ts";
import { TO_BE_DELETED_TAINT, createPool } from "../../../src/domain/index.ts";
import { createContext, type PoolContext } from "../../../src/domain/context.ts";
import { FakeClock } from "./clock.ts";
import { FakeCluster } from "./cluster.ts";
import type { NodeSpec } from "./cluster.ts";
import { FakePowerSwitch } from "./power-switch.ts";
import { RecordingReporter } from "./reporter.ts";
import { FakeRecords } from "./records.ts";
import { LaggingView } from "./lagging-view.ts";

export const PREFIX = "k3s://";

/** The domain's types, for test code that imports nothing from src/ itself (the property test's oracle). */
export type { Machine, NodeRef, NodeView, PoolDeps, PowerControl, QuarantineSettings, ScaleUpSettings } from "../../../src/domain/index.ts";

export const POWER_OFF: PowerOffSettings = {
  notReadyTimeoutMs: 300_000,
  onShutdownTimeout: "keep-power",
  maxPodAttempts: 3,
  graceMs: 120_000,
  standbyWatts: 5,
  standbyWindowMs: 10_000,
  retryMs: 1_000,
  maxRetryMs: 60_000,
};

export const TEMPLATE: NodeTemplate = {
  cpu: "24",
  memory: "64Gi",
  pods: "110",
  resources: {},
  labels: { "example.com/pool": "workers" },
  taints: [],
};

export interface GroupOptions {
  readonly id: string;
  /** Machine names, config order. */
  readonly machines: readonly string[];
  readonly minSize?: number;
  readonly maxSize?: number;
  readonly hold?: readonly string[];
  /** Machines whose plug has a power sensor. */
  readonly sensors?: readonly string[];
  /** Machines whose power control shuts the OS down itself (a BMC), instead of the power-off pod. */
  readonly shutsDown?: readonly string[];
  /** The backend of each machine's power control, by name (absent: "fake"). */
  readonly backends?: Readonly<Record<string, string>>;
  /** The device each machine's control belongs to, by name (absent: its own): calls to one device queue. */
  readonly devices?: Readonly<Record<string, string>>;
  readonly template?: NodeTemplate;
  /** Machines' idle draw in watts, by name (absent: none configured). */
  readonly idleWatts?: Readonly<Record<string, number>>;
  /** The identity each machine's device is pinned to in the configuration, by name (absent: learned). */
  readonly identities?: Readonly<Record<string, string>>;
}

export interface WorldOptions {
  readonly groups?: readonly GroupOptions[];
  readonly powerOff?: Partial<PowerOffSettings>;
  /** Inrush limit; absent, the config has none and the domain's default (no limit) applies. */
  readonly scaleUp?: ScaleUpSettings;
  /** Boot-failure back-off; absent, the config has none and the domain's default applies. */
  readonly quarantine?: QuarantineSettings;
  /** Plug state at the start (default: all off). */
  readonly on?: readonly string[];
  /** Machines with a record of plugpool switching them on (default: those of `on` that no Node claims). */
  readonly poweredByPlugpool?: readonly string[];
  /** The pool sees the cluster through a view that lags until `view.sync()` (default: the truth, at once). */
  readonly lagging?: boolean;
  /** The pool acts only while this says so (default: no leadership, it always acts). */
  readonly leadership?: Leadership;
  /** Changes each pool's ports before the pool gets them (a test's tap), told that pool's leadership. */
  readonly tap?: (deps: PoolDeps, leadership: Leadership | undefined) => PoolDeps;
}

export function buildConfig(options: WorldOptions = {}): PoolConfig {
  const groups = options.groups ?? [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"] }];
  let index = 0;
  const specs: NodeGroupSpec[] = groups.map((g) => ({
    id: g.id,
    minSize: g.minSize ?? 0,
    maxSize: g.maxSize ?? g.machines.length,
    template: g.template ?? TEMPLATE,
    machines: g.machines.map(
      (name): Machine => ({
        name,
        group: g.id,
        index: index++,
        hold: g.hold?.includes(name) ?? false,
        ...(g.idleWatts?.[name] !== undefined && { idleWatts: g.idleWatts[name] }),
        power: {
          backend: g.backends?.[name] ?? "fake",
          key: `plug-${name}`,
          label: `plug of ${name}`,
          measuresWatts: g.sensors?.includes(name) === true,
          ...(g.shutsDown?.includes(name) === true && { shutsDown: true }),
          ...(g.identities?.[name] !== undefined && { identity: g.identities[name] }),
        },
      }),
    ),
  }));
  return {
    providerIDPrefix: PREFIX,
    gpuLabel: "example.com/gpu",
    gpuTypes: [],
    powerOff: { ...POWER_OFF, ...options.powerOff },
    ...(options.scaleUp && { scaleUp: options.scaleUp }),
    ...(options.quarantine && { quarantine: options.quarantine }),
    groups: specs,
  };
}

/** Fakes, a configuration and a pool over them; `restart` builds a new pool over the same fakes. */
export class World {
  readonly clock = new FakeClock();
  readonly power = new FakePowerSwitch();
  readonly cluster = new FakeCluster();
  readonly reporter = new RecordingReporter();
  readonly records = new FakeRecords();
  readonly view: LaggingView | undefined;
  readonly config: PoolConfig;
  leadership: Leadership | undefined;
  readonly #tap: WorldOptions["tap"];
  wakes = 0;
  pool: Pool;

  constructor(options: WorldOptions = {}) {
    this.config = buildConfig(options);
    this.cluster.now = () => this.clock.now();
    this.power.now = () => this.clock.monotonic();
    for (const m of this.machines()) this.power.add(m.power, options.on?.includes(m.name) ?? false);
    const devices = new Map(
      (options.groups ?? []).flatMap((g) => Object.entries(g.devices ?? {})).map(([name, device]) => [`plug-${name}`, device]),
    );
    this.power.deviceOf = (control) => devices.get(control.key) ?? control.key;
    for (const name of options.poweredByPlugpool ?? []) {
      this.records.seed(name, { at: this.clock.now(), why: "scale-up" });
    }
    this.view = options.lagging === true ? new LaggingView(this.cluster) : undefined;
    this.leadership = options.leadership;
    this.#tap = options.tap;
    this.pool = this.#newPool();
  }

  machines(): Machine[] {
    return this.config.groups.flatMap((g) => g.machines);
  }

  machine(name: string): Machine {
    const machine = this.machines().find((m) => m.name === name);
    if (machine === undefined) throw new Error(`no machine ${name}`);
    return machine;
  }

  /** A new process's pool over the same fakes; with `leadership`, one that acts under it (another instance). */
  restart(leadership?: Leadership): Pool {
    if (leadership !== undefined) this.leadership = leadership;
    this.pool = this.#newPool();
    return this.pool;
  }

  /** Registers the machine's Node the usual way (providerID = prefix + name), Ready. */
  /** A domain context over this world's fakes (any of them replaced), for tests that call domain functions directly. */
  context(overrides: Partial<PoolDeps> = {}): PoolContext {
    const deps: PoolDeps = { clock: this.clock, power: this.power, cluster: this.cluster, lookup: this.cluster, teardown: this.cluster, records: this.records, reporter: this.reporter, ...overrides };
    return createContext(deps, this.config);
  }

  register(name: string, spec: Partial<NodeSpec> = {}): void {
    this.cluster.addNode({ name, providerID: PREFIX + name, readyChangedAt: this.clock.now(), ...spec });
  }

  /** Registers the Node and puts CA's ToBeDeleted taint on it. */
  registerTainted(name: string): void {
    this.register(name, { taints: [{ key: TO_BE_DELETED_TAINT, value: "1", effect: "NoSchedule" }] });
  }

  /** A node ref as cluster-autoscaler sends it for a real Node. */
  ref(name: string): { name: string; providerID: string } {
    return { name, providerID: PREFIX + name };
  }

  /** A fake node as cluster-autoscaler sends it for an instance without a Node. */
  fakeRef(name: string): { name: string; providerID: string } {
    return { name: PREFIX + name, providerID: PREFIX + name };
  }

  /** Runs the power-off runner `passes` times, advancing the clock by each answer. Returns the last answer. */
  async drive(passes = 50): Promise<number | undefined> {
    let wait: number | undefined;
    for (let i = 0; i < passes; i++) {
      wait = await this.pool.reconcile();
      if (wait === undefined) return undefined;
      this.clock.advance(wait);
      this.cluster.finishPodDeletion();
    }
    return wait;
  }

  #newPool(): Pool {
    const deps: PoolDeps = {
      clock: this.clock,
      power: this.power,
      cluster: this.view ?? this.cluster,
      lookup: this.cluster,
      teardown: this.cluster,
      records: this.records,
      reporter: this.reporter,
      wake: () => {
        this.wakes++;
      },
      ...(this.leadership && { leadership: this.leadership }),
    };
    return createPool(this.#tap?.(deps, this.leadership) ?? deps, this.config);
  }
}

/** worker-1 registered, tainted and asked to be deleted; worker-2 registered and running. */
/**
 * worker-1 being powered off, its power-off pod created; then its plug switched off by hand and read off while
 * its Node still shows Ready (the power-off takes that for the shutdown), and switched on again.
 */
export async function plugOffAndOnAgainMidPowerOff(): Promise<World> {
  const w = await deletingWorker1();
  const plug = w.machine("worker-1").power;
  await w.pool.reconcile();
  w.power.set(plug, false);
  await w.pool.refresh();
  await w.pool.reconcile();
  w.power.set(plug, true);
  return w;
}

export async function deletingWorker1(options: WorldOptions = {}): Promise<World> {
  const w = new World({ on: ["worker-1", "worker-2"], ...options });
  w.registerTainted("worker-1");
  w.register("worker-2");
  await w.pool.refresh();
  await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
  return w;
}
