/**
 * machine-simulator — bare-metal machines behind emulated plugs, for the end-to-end suite and the sandbox.
 *
 * Each machine is attached to the relay of an emulated ESPHome plug and acts as a kubelet would, through the
 * apiserver (as admin):
 * - relay on → boots for `bootDelayMs`, then registers its Node (named as the machine unless `nodeName` says
 *   otherwise, providerID `<prefix><node name>`, Ready, capacity and labels as given) and heartbeats (Node Ready
 *   condition and its Lease) every `heartbeatMs`; a heartbeat that fails is tried again at the next one, but
 *   once its Node is deleted the kubelet stops until it restarts (`restartKubelet`), as a real one does;
 * - pods bound to it are reported Running (plugpool's power-off pod excepted); a pod marked for deletion on it
 *   while it is up is removed at once (its containers stopped), as the kubelet finishes a graceful deletion;
 * - plugpool's power-off pod bound to it → the OS shuts down: after `shutdownDelayMs` the pod Succeeded,
 *   heartbeats stop and the Node is reported NotReady; the draw falls to standby;
 * - relay off → the machine is gone at once (no heartbeats; the Node stays until someone deletes it);
 * - with a DRA driver (`dra`), once its Node is registered, the driver's kubelet plugin publishes the machine's
 *   devices as one ResourceSlice (pool named for the Node, owned by the Node, so the garbage collector removes it
 *   with the Node), and publishes them again when they change (`publishDevices`).
 * Faults: `neverBoots` (power on, nothing registers), `hangsAtPowerOff` (the OS halts but the board keeps
 * drawing power, so a sensor never sees standby), `nodeName` (a kubelet configured with another name), and
 * `pressPowerButton` (boots without being asked, when its relay is on and it is off).
 * Power draw (for plugs with a sensor): off/halted 2 W (standby), booting 120 W, running 80 W, hung 45 W.
 */
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  ResourceV1Api,
  setHeaderOptions,
  Watch,
  type KubeConfig,
  type V1Device,
  type V1Pod,
} from "@kubernetes/client-node";
import type { AttachedMachine, EmulatedPlug } from "./plug-emulator/index.ts";

export type MachineState = "off" | "booting" | "running" | "shutting-down" | "halted";

/**
 * What powers a simulated machine: the relay of an emulated ESPHome plug (`plug` and `switchName`), or any other
 * power control as an `outlet` (see `pollingOutlet`).
 */
export type PowerSource =
  | { readonly plug: EmulatedPlug; readonly switchName: string }
  | { readonly outlet: Outlet };

/** A machine's power as the simulator needs it, whatever switches it. */
export interface Outlet {
  isOn(): boolean;
  /** Tells `machine` of every change of the power, and asks it for its draw; undefined detaches. */
  attach(machine: AttachedMachine | undefined): void;
}

/**
 * An outlet over a device the simulator can only look at (a Shelly emulator, a Home Assistant entity, a BMC):
 * its state is read every `intervalMs` (a read still running is not started again), and a change is a power
 * change; the machine's draw is written back with `setWatts` on each look, where the device shows one.
 */
export function pollingOutlet(device: {
  readonly isOn: () => boolean | Promise<boolean>;
  readonly setWatts?: (watts: number) => void;
  readonly intervalMs?: number;
  /** The state before the first look (default off). */
  readonly initially?: boolean;
}): Outlet {
  let timer: ReturnType<typeof setInterval> | undefined;
  let last = device.initially ?? false;
  let looking = false;
  return {
    isOn: () => last,
    attach(machine) {
      clearInterval(timer);
      timer = undefined;
      if (machine === undefined) return;
      timer = setInterval(() => {
        if (looking) return;
        looking = true;
        void Promise.resolve(device.isOn())
          .then((now) => {
            device.setWatts?.(machine.watts());
            if (now !== last) {
              last = now;
              machine.powerChanged?.(now);
            }
          })
          .catch(() => undefined)
          .finally(() => { looking = false; });
      }, device.intervalMs ?? 50);
    },
  };
}

function outletOf(source: PowerSource): Outlet {
  if ("outlet" in source) return source.outlet;
  const { plug, switchName } = source;
  return { isOn: () => plug.state(switchName), attach: (machine) => { plug.attachMachine(switchName, machine); } };
}

export type SimulatedMachineSpec = PowerSource & {
  readonly name: string;
  readonly neverBoots?: boolean;
  readonly hangsAtPowerOff?: boolean;
  /** The name its kubelet registers the Node under (default: the machine's name), e.g. a typo in its config. */
  readonly nodeName?: string;
  /** A DRA driver on the machine, and the devices it publishes. */
  readonly dra?: { readonly driver: string; readonly devices: readonly V1Device[] };
};

export interface MachineSimulatorOptions {
  readonly kubeConfig: KubeConfig;
  readonly providerIDPrefix: string;
  readonly machines: readonly SimulatedMachineSpec[];
  readonly capacity: Readonly<Record<string, string>>;
  readonly labels?: Readonly<Record<string, string>>;
  readonly bootDelayMs?: number;
  readonly shutdownDelayMs?: number;
  readonly heartbeatMs?: number;
  /** Called on every state change (the sandbox narrates them). */
  readonly onChange?: (machine: string, state: MachineState) => void;
}

export interface MachineSimulator {
  state(machine: string): MachineState;
  /** Someone presses the machine's power button: it boots if its relay is on and it is not running. */
  pressPowerButton(machine: string): void;
  /** The kubelet of a running machine restarts: it registers its Node again (if deleted) and heartbeats. */
  restartKubelet(machine: string): void;
  /**
   * The machine's DRA driver publishes `devices` from now on (a driver upgraded, a device swapped): at once, in the
   * next generation of its pool, if the machine is running; else once it registers.
   */
  publishDevices(machine: string, devices: readonly V1Device[]): void;
  /** Calls to the apiserver that failed (a test can assert there were none). */
  failures(): readonly unknown[];
  stop(): Promise<void>;
}

const POWER_OFF_LABEL = "app.kubernetes.io/component";
const STANDBY_WATTS = 2;
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

interface Sim {
  readonly spec: SimulatedMachineSpec;
  readonly outlet: Outlet;
  /** The Node name its kubelet uses. */
  readonly node: string;
  state: MachineState;
  timers: Set<NodeJS.Timeout>;
  hung: boolean;
  /** When the Node last became Ready: a condition's lastTransitionTime moves only when its status does. */
  readySince: Date;
  /** The uid of the Node it last registered, which owns its ResourceSlice. */
  nodeUid: string | undefined;
  /** What its DRA driver publishes, and the generation of its pool. */
  devices: readonly V1Device[];
  poolGeneration: number;
}

export function startMachineSimulator(options: MachineSimulatorOptions): MachineSimulator {
  const core = options.kubeConfig.makeApiClient(CoreV1Api);
  const leases = options.kubeConfig.makeApiClient(CoordinationV1Api);
  const resource = options.kubeConfig.makeApiClient(ResourceV1Api);
  const bootDelayMs = options.bootDelayMs ?? 2000;
  const shutdownDelayMs = options.shutdownDelayMs ?? 1000;
  const heartbeatMs = options.heartbeatMs ?? 2000;
  const sims = new Map<string, Sim>();
  const byNode = new Map<string, Sim>();
  const failures: unknown[] = [];
  let stopped = false;

  const later = (sim: Sim, ms: number, fn: () => Promise<void> | void) => {
    const timer = setTimeout(() => {
      sim.timers.delete(timer);
      if (stopped) return;
      Promise.resolve(fn()).catch((e: unknown) => failures.push(e));
    }, ms);
    sim.timers.add(timer);
  };
  const cancel = (sim: Sim) => {
    for (const t of sim.timers) clearTimeout(t);
    sim.timers.clear();
  };
  const setState = (sim: Sim, state: MachineState) => {
    sim.state = state;
    options.onChange?.(sim.spec.name, state);
  };

  function nodeBody(name: string, ready: boolean) {
    const now = new Date();
    return {
      metadata: {
        name,
        // The labels every kubelet sets (on amd64 machines).
        labels: { ...options.labels, "kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux" },
      },
      spec: { providerID: options.providerIDPrefix + name },
      status: {
        capacity: { ...options.capacity },
        allocatable: { ...options.capacity },
        conditions: [readyCondition(ready, now)],
        nodeInfo: nodeInfo(),
      },
    };
  }

  async function register(sim: Sim): Promise<void> {
    if (sim.state !== "running") return;
    const name = sim.node;
    const body = nodeBody(name, true);
    try {
      try {
        sim.nodeUid = (await core.createNode({ body })).metadata?.uid;
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 409)) throw error;
        // Re-registering after a reboot: the Node may still be there, so refresh its status instead.
        sim.nodeUid = (await core.patchNodeStatus({ name, body: { status: body.status } }, MERGE)).metadata?.uid;
      }
    } catch (error) {
      // The apiserver may be restarting: the kubelet tries again shortly.
      failures.push(error);
      later(sim, heartbeatMs, () => register(sim));
      return;
    }
    await publish(sim);
    await heartbeat(sim);
  }

  // The DRA driver's kubelet plugin: all the machine's devices in one ResourceSlice, its pool named for the Node.
  // A slice left from the Node's previous registration is taken over (its owner is the old Node).
  async function publish(sim: Sim): Promise<void> {
    const dra = sim.spec.dra;
    if (dra === undefined || sim.state !== "running" || sim.nodeUid === undefined) return;
    const name = `${sim.node}-${dra.driver}`;
    const body = {
      metadata: { name, ownerReferences: [{ apiVersion: "v1", kind: "Node", name: sim.node, uid: sim.nodeUid, controller: true }] },
      spec: {
        driver: dra.driver,
        nodeName: sim.node,
        pool: { name: sim.node, generation: sim.poolGeneration, resourceSliceCount: 1 },
        devices: [...sim.devices],
      },
    };
    try {
      try {
        await resource.createResourceSlice({ body });
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 409)) throw error;
        await resource.patchResourceSlice({ name, body }, MERGE);
      }
    } catch (error) {
      failures.push(error);
      later(sim, heartbeatMs, () => publish(sim));
    }
  }

  async function heartbeat(sim: Sim): Promise<void> {
    if (sim.state !== "running") return;
    const name = sim.node;
    const now = new Date();
    try {
      await core.patchNodeStatus({ name, body: { status: { conditions: [readyCondition(true, now, sim.readySince)] } } }, MERGE);
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return;
      // The apiserver may be restarting: the kubelet tries again at its next heartbeat.
      failures.push(error);
      later(sim, heartbeatMs, () => heartbeat(sim));
      return;
    }
    const lease = { metadata: { name, namespace: "kube-node-lease" }, spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: now } };
    try {
      await leases.replaceNamespacedLease({ name, namespace: "kube-node-lease", body: lease });
    } catch {
      await leases.createNamespacedLease({ namespace: "kube-node-lease", body: lease }).catch(() => undefined);
    }
    later(sim, heartbeatMs, () => heartbeat(sim));
  }

  function boot(sim: Sim): void {
    if (sim.state !== "off" && sim.state !== "halted") return;
    cancel(sim);
    sim.hung = false;
    setState(sim, "booting");
    if (sim.spec.neverBoots === true) return;
    later(sim, bootDelayMs, async () => {
      sim.readySince = new Date();
      setState(sim, "running");
      await register(sim);
    });
  }

  function powerLost(sim: Sim): void {
    cancel(sim);
    sim.hung = false;
    setState(sim, "off");
  }

  function shutDown(sim: Sim, pod: V1Pod): void {
    if (sim.state !== "running") return;
    setState(sim, "shutting-down");
    cancel(sim);
    later(sim, shutdownDelayMs, async () => {
      const name = sim.node;
      sim.hung = sim.spec.hangsAtPowerOff === true;
      setState(sim, "halted");
      const podName = pod.metadata?.name ?? "";
      const namespace = pod.metadata?.namespace ?? "";
      await core
        .patchNamespacedPodStatus({ name: podName, namespace, body: { status: { phase: "Succeeded" } } }, MERGE)
        .catch(() => undefined);
      // The kubelet's last word as the OS goes down.
      await core.patchNodeStatus({ name, body: { status: { conditions: [readyCondition(false, new Date())] } } }, MERGE);
    });
  }

  async function markRunning(pod: V1Pod): Promise<void> {
    const name = pod.metadata?.name ?? "";
    const namespace = pod.metadata?.namespace ?? "";
    const now = new Date();
    await core.patchNamespacedPodStatus(
      {
        name,
        namespace,
        body: {
          status: {
            phase: "Running",
            startTime: now,
            conditions: [{ type: "Ready", status: "True", lastTransitionTime: now }],
          },
        },
      },
      MERGE,
    );
  }

  // The kubelet's part of a graceful deletion (kubectl delete, CA's evictions): the containers are stopped, so
  // the pod goes at once. A machine that is down leaves it Terminating, as a real one would.
  async function confirmDeletion(pod: V1Pod): Promise<void> {
    const name = pod.metadata?.name ?? "";
    const namespace = pod.metadata?.namespace ?? "";
    await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 }).catch((e: unknown) => {
      if (!(e instanceof ApiException && e.code === 404)) throw e;
    });
  }

  for (const spec of options.machines) {
    const sim: Sim = {
      spec, outlet: outletOf(spec), node: spec.nodeName ?? spec.name, state: "off", timers: new Set(), hung: false, readySince: new Date(),
      nodeUid: undefined, devices: spec.dra?.devices ?? [], poolGeneration: 1,
    };
    sims.set(spec.name, sim);
    byNode.set(sim.node, sim);
    sim.outlet.attach({
      powerChanged: (on) => {
        if (on) boot(sim);
        else powerLost(sim);
      },
      watts: () => {
        switch (sim.state) {
          case "booting":
            return 120;
          case "running":
          case "shutting-down":
            return 80;
          default:
            return sim.hung ? 45 : STANDBY_WATTS;
        }
      },
    });
    if (sim.outlet.isOn()) boot(sim);
  }

  // One pod watch acts as every machine's kubelet.
  const watch = new Watch(options.kubeConfig);
  let request: { abort(): void } | undefined;
  const seen = new Set<string>();
  const startWatch = async (): Promise<void> => {
    request = await watch.watch(
      "/api/v1/pods",
      {},
      (phase: string, pod: V1Pod) => {
        const node = pod.spec?.nodeName;
        const sim = node === undefined ? undefined : byNode.get(node);
        if (sim === undefined || phase === "DELETED") return;
        if (pod.metadata?.deletionTimestamp !== undefined) {
          if (sim.state === "running" || sim.state === "shutting-down") confirmDeletion(pod).catch((e: unknown) => failures.push(e));
          return;
        }
        const key = `${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}/${pod.metadata?.uid ?? ""}`;
        if (pod.metadata?.labels?.[POWER_OFF_LABEL] === "power-off") {
          if (!seen.has(key)) {
            seen.add(key);
            shutDown(sim, pod);
          }
        } else if (sim.state === "running" && pod.status?.phase === "Pending" && !seen.has(key)) {
          seen.add(key);
          markRunning(pod).catch((e: unknown) => failures.push(e));
        }
      },
      () => {
        if (!stopped) setTimeout(() => void startWatch().catch(() => undefined), 500);
      },
    );
  };
  void startWatch().catch(() => undefined);

  return {
    state: (machine) => {
      const sim = sims.get(machine);
      if (sim === undefined) throw new Error(`no simulated machine ${machine}`);
      return sim.state;
    },
    pressPowerButton: (machine) => {
      const sim = sims.get(machine);
      if (sim?.outlet.isOn() === true) boot(sim);
    },
    restartKubelet: (machine) => {
      const sim = sims.get(machine);
      if (sim?.state !== "running") return;
      cancel(sim);
      register(sim).catch((e: unknown) => failures.push(e));
    },
    publishDevices: (machine, devices) => {
      const sim = sims.get(machine);
      if (sim === undefined) throw new Error(`no simulated machine ${machine}`);
      sim.devices = devices;
      sim.poolGeneration += 1;
      publish(sim).catch((e: unknown) => failures.push(e));
    },
    failures: () => failures,
    stop: async () => {
      stopped = true;
      request?.abort();
      for (const sim of sims.values()) {
        cancel(sim);
        sim.outlet.attach(undefined);
      }
      await Promise.resolve();
    },
  };
}

function readyCondition(ready: boolean, now: Date, since: Date = now) {
  return {
    type: "Ready",
    status: ready ? "True" : "False",
    reason: ready ? "KubeletReady" : "KubeletNotReady",
    message: ready ? "kubelet is posting ready status" : "the machine is shutting down",
    lastHeartbeatTime: now,
    lastTransitionTime: since,
  };
}

function nodeInfo() {
  return {
    architecture: "amd64",
    operatingSystem: "linux",
    kubeletVersion: "v1.36.5",
    kernelVersion: "6.12.0",
    osImage: "simulated",
    containerRuntimeVersion: "simulated://1",
    machineID: "",
    systemUUID: "",
    bootID: "",
    kubeProxyVersion: "",
  };
}
