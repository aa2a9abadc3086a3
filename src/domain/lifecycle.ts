// Where a machine is in its life, decided in this one place from plugpool's memory (power-off, command in flight,
// queue, plug reading), its power-on record and the Nodes that claim it. Every "which state is it in" question
// of the domain is a switch over this.
import type { Machine, NodeView } from "./model.ts";
import type { PoolContext, PowerOffJob } from "./state.ts";
import { nodesOf, stateOf } from "./state.ts";

export type Lifecycle =
  /** A power-off runs (or is being stopped: `job.aborting`); nothing else touches the machine meanwhile. */
  | { readonly phase: "powering-off"; readonly job: PowerOffJob }
  /** A switch command is in flight: its outcome decides what comes next. */
  | { readonly phase: "switching"; readonly to: "on" | "off" }
  /** A Node claims it (by providerID or by name): it runs, or booted under that Node. */
  | { readonly phase: "registered"; readonly nodes: readonly NodeView[] }
  /** A scale-up chose it and the inrush limit holds its plug-on back: switched on in turn. */
  | { readonly phase: "queued"; readonly position: number }
  /** plugpool switched it on (its power-on record) and no Node claims it yet. */
  | { readonly phase: "booting"; readonly since: number }
  /** Its power is on, no Node claims it, and plugpool did not switch it on: someone else powered it. */
  | { readonly phase: "powered-outside" }
  /** Its power reads off and nothing is under way. */
  | { readonly phase: "off" }
  /** Its power has not been read yet (or only failed reads since start) and nothing is under way. */
  | { readonly phase: "unknown" };

export type Phase = Lifecycle["phase"];

/** The machine's lifecycle now. The order of the checks is the order of precedence of the phases. */
export function lifecycleOf(ctx: PoolContext, machine: Machine): Lifecycle {
  const { plan, power } = stateOf(ctx, machine);
  if (plan.kind === "powering-off") return { phase: "powering-off", job: plan.job };
  if (power.command !== undefined) return { phase: "switching", to: power.command };
  const nodes = nodesOf(ctx, machine);
  if (nodes.length > 0) return { phase: "registered", nodes };
  if (plan.kind === "queued") return { phase: "queued", position: plan.position };
  const record = ctx.deps.records.powerOn(machine.name);
  if (record !== undefined) return { phase: "booting", since: record.at };
  switch (power.plug) {
    case "on":
      return { phase: "powered-outside" };
    case "off":
      return { phase: "off" };
    case "unknown":
      return { phase: "unknown" };
  }
}
