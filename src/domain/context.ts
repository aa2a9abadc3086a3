// What the domain's functions share: the outside world a pool works with, its configuration and machines, the
// machines' lifecycles (lifecycle.ts keeps them) and the group locks. Everything else is derived from the
// ClusterView on each call, so a restart (a new pool over the same plugs and cluster) loses nothing that matters.
import type { Clock, ClusterView, Leadership, NodeLookup, NodeTeardown, PowerRecords, PowerSwitch, Reporter } from "./ports.ts";
import type { Machine, NodeGroupSpec, PoolConfig } from "./model.ts";
import type { Lock } from "./lock.ts";
import type { MachineStates } from "./lifecycle.ts";
import { createMachineStates } from "./lifecycle.ts";
import { PlugpoolError } from "./errors.ts";
import { createLock } from "./lock.ts";

/** The outside world a pool works with. */
export interface PoolDeps {
  readonly clock: Clock;
  readonly power: PowerSwitch;
  readonly cluster: ClusterView;
  /** Fresh reads of the Nodes that claim a machine, right before an irreversible act. */
  readonly lookup: NodeLookup;
  readonly teardown: NodeTeardown;
  /** plugpool's own power-ons and quarantines, kept on the cluster. */
  readonly records: PowerRecords;
  readonly reporter: Reporter;
  /** Called when a power-off was started, so the owner of the timer runs `reconcile` soon. */
  readonly wake?: () => void;
  /**
   * When given, the pool acts only while this says so: every irreversible act asks it right before it is made
   * (see leadership.ts), and while it does not, the pool answers `not-leader` and its runner does nothing.
   */
  readonly leadership?: Leadership;
}

/** Memory of the pool as a whole. */
export interface PoolMemory {
  /** When this pool was built (monotonic ms): the inrush limit counts a restart as a full window. */
  readonly createdAt: number;
  /** When each recent plug-on was sent (monotonic ms), oldest first: the inrush limit's window. */
  readonly powerOnsSent: number[];
}

/** Everything the domain's functions share. */
export interface PoolContext {
  readonly deps: PoolDeps;
  readonly config: PoolConfig;
  /** All machines, config order. */
  readonly machines: readonly Machine[];
  /** Each machine's lifecycle; only lifecycle.ts reads or changes it. */
  readonly states: MachineStates;
  /** One per group: increase, delete, decrease and the runner's plug-ons of a group run one at a time. */
  readonly locks: ReadonlyMap<string, Lock>;
  readonly memory: PoolMemory;
}

/** Fresh memory for the configured machines: every plug unknown, nothing wanted, no power-off. */
export function createContext(deps: PoolDeps, config: PoolConfig): PoolContext {
  const machines = config.groups.flatMap((g) => g.machines).toSorted((a, b) => a.index - b.index);
  const states = createMachineStates(deps, machines);
  const locks = new Map(config.groups.map((g) => [g.id, createLock()]));
  const memory = { createdAt: deps.clock.monotonic(), powerOnsSent: [] };
  return { deps, config, machines, states, locks, memory };
}

/** Runs `fn` holding the group's lock. */
export function withGroupLock<T>(ctx: PoolContext, groupId: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const lock = ctx.locks.get(groupId);
  if (lock === undefined) throw new PlugpoolError("node-group-not-found", `node group "${groupId}" is not configured`);
  return lock(fn, signal);
}

/** The configured group with this id; throws `node-group-not-found`. */
export function groupOf(ctx: PoolContext, groupId: string): NodeGroupSpec {
  const group = ctx.config.groups.find((g) => g.id === groupId);
  if (group === undefined) throw new PlugpoolError("node-group-not-found", `node group "${groupId}" is not configured`);
  return group;
}
