// The operations the property test draws: CA calls, cluster and plug events, time and restarts.
import fc from "fast-check";
import type { PowerOp } from "../harness/fakes/power-switch.ts";
import type { TeardownOp } from "../harness/fakes/cluster.ts";
import type { GroupOptions } from "../harness/fakes/world.ts";

// The pool mixes backends as a site would: ESPHome plugs, BMCs that shut the OS down themselves (no power-off
// pod), and Home Assistant entities whose calls all queue at one hub.
const HUB = "home-assistant.lan";
export const GROUPS: readonly GroupOptions[] = [
  {
    id: "a",
    machines: ["a-1", "a-2", "a-3", "a-4"],
    hold: ["a-4"],
    shutsDown: ["a-2"],
    backends: { "a-1": "esphome", "a-2": "redfish", "a-3": "home-assistant", "a-4": "esphome" },
    devices: { "a-3": HUB },
  },
  {
    id: "b",
    machines: ["b-1", "b-2", "b-3"],
    minSize: 1,
    sensors: ["b-1"],
    shutsDown: ["b-2"],
    backends: { "b-1": "shelly", "b-2": "redfish", "b-3": "home-assistant" },
    devices: { "b-3": HUB },
  },
];
export const NAMES = GROUPS.flatMap((g) => g.machines);

export type NodeEvent = "register" | "taint" | "untaint" | "remove-node";

export type RegisterMode = "normal" | "name-only" | "foreign" | "stranger";

export type CaOp =
  | { readonly kind: "increase"; readonly group: string; readonly delta: number }
  | {
      readonly kind: "delete";
      readonly picks: readonly number[];
      readonly fake: boolean;
      readonly taint: boolean;
      /** The view has caught up with CA's taint before the call (it usually has: CA taints, then calls). */
      readonly seen: boolean;
    }
  | { readonly kind: "decrease"; readonly group: string; readonly delta: number }
  | { readonly kind: "refresh" }
  | { readonly kind: "run" }
  /**
   * Another plugpool instance takes plugpool's Lease (a rolling update, a partition): the one acting stops acting,
   * its calls in flight going on, and a fresh pool over the same cluster, devices and records acts from then on; the
   * cluster-autoscaler beside it is the one that calls.
   */
  | { readonly kind: "handover" };

export type Op =
  | CaOp
  /**
   * Two CA calls at once, the second sent `stagger` turns of the event loop after the first; with `synced`, the
   * watch delivers what has landed by then (the first call's writes among it) just before the second.
   */
  | { readonly kind: "parallel"; readonly a: CaOp; readonly b: CaOp; readonly stagger: number; readonly synced: boolean }
  /**
   * The machine's Node registers (Ready or not), the usual way, by name only, with a providerID of another form, or
   * as a "stranger": under a name and providerID that match no machine (a hostname typo, a reinstalled OS).
   */
  | { readonly kind: "register"; readonly m: number; readonly mode: RegisterMode; readonly ready: boolean }
  | { readonly kind: "node"; readonly m: number; readonly event: NodeEvent }
  | { readonly kind: "ready"; readonly m: number; readonly ready: boolean }
  /** The hold annotation set to a value (any: only "false" holds nothing), or removed. */
  | { readonly kind: "hold"; readonly m: number; readonly value: string | undefined }
  | { readonly kind: "armed"; readonly m: number; readonly event: NodeEvent }
  | { readonly kind: "plug-fail-next"; readonly op: PowerOp }
  | { readonly kind: "plug-fault"; readonly m: number; readonly on: boolean }
  | { readonly kind: "flip"; readonly m: number; readonly on: boolean }
  /** Of the next writes of `op`, `after` land and the one after them fails. */
  | { readonly kind: "cluster-fail-next"; readonly op: TeardownOp; readonly after: number }
  | { readonly kind: "tick"; readonly ms: number }
  /** The wall clock is set forward or back while no time passes (NTP, a hand set). */
  | { readonly kind: "clock-step"; readonly ms: number }
  | { readonly kind: "pods-go" }
  | { readonly kind: "shutdowns" }
  | { readonly kind: "restart" }
  /** The watch-fed view catches up with the cluster. */
  | { readonly kind: "view-sync" }
  /** The watches stop (or start again) hearing from the apiserver. */
  | { readonly kind: "watch"; readonly up: boolean }
  /** The next switch command of this kind acts at the plug but its answer is lost. */
  | { readonly kind: "lose-answer"; readonly op: "turnOn" | "turnOff" }
  /** The next power-on record cannot be written. */
  | { readonly kind: "records-fail-next" }
  /** The addresses of two machines' power controls now reach each other's device (a DHCP lease handed out anew). */
  | { readonly kind: "swap-addresses"; readonly a: number; readonly b: number };

const m = fc.integer({ min: 0, max: NAMES.length - 1 });
const group = fc.constantFrom(...GROUPS.map((g) => g.id));
const nodeEvent = fc.constantFrom<NodeEvent>("register", "taint", "untaint", "remove-node");

const caOp: fc.Arbitrary<CaOp> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("increase"), group, delta: fc.integer({ min: -1, max: 3 }) }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("delete"),
      picks: fc.uniqueArray(m, { minLength: 1, maxLength: 2 }),
      fake: fc.boolean(),
      taint: fc.constantFrom(true, true, true, false),
      seen: fc.constantFrom(true, true, false),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("decrease"), group, delta: fc.integer({ min: -3, max: 0 }) }) },
  { weight: 4, arbitrary: fc.constant({ kind: "refresh" as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: "run" as const }) },
);

/** The second of two calls at once: sometimes a handover, which the first call, in flight, lives through. */
const secondOp: fc.Arbitrary<CaOp> = fc.oneof({ weight: 5, arbitrary: caOp }, { weight: 1, arbitrary: fc.constant({ kind: "handover" as const }) });

export const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 14, arbitrary: caOp },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("parallel"), a: caOp, b: secondOp, stagger: fc.integer({ min: 0, max: 4 }), synced: fc.boolean() }) },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant("register"),
      m,
      mode: fc.constantFrom<RegisterMode>("normal", "normal", "normal", "name-only", "foreign", "stranger"),
      ready: fc.constantFrom(true, true, false),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("node"), m, event: nodeEvent }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("ready"), m, ready: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("hold"), m, value: fc.constantFrom<string | undefined>("true", "", "yes", "false", undefined, undefined) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("armed"), m, event: nodeEvent }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("plug-fail-next"), op: fc.constantFrom<PowerOp>("read", "turnOn", "turnOff") }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("plug-fault"), m, on: fc.constantFrom(true, false, false) }) },
  // Mostly off: a plug rebooting with restore_mode ALWAYS_OFF under a running node.
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("flip"), m, on: fc.constantFrom(false, false, true) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("cluster-fail-next"),
      op: fc.constantFrom<TeardownOp>("markPowerOff", "clearPowerOffMark", "createPowerOffPod", "deletePowerOffPod", "deleteNode"),
      after: fc.constantFrom(0, 0, 1),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("tick"),
      ms: fc.constantFrom(0, 500, 1000, 2000, 5000, 10_000, 60_000, 130_000, 310_000),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("clock-step"), ms: fc.constantFrom(-300_000, -60_000, -5_000, 5_000, 60_000, 300_000) }) },
  { weight: 2, arbitrary: fc.constant({ kind: "pods-go" as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: "shutdowns" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "restart" as const }) },
  { weight: 8, arbitrary: fc.constant({ kind: "view-sync" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("watch"), up: fc.constantFrom(true, true, false) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("lose-answer"), op: fc.constantFrom<"turnOn" | "turnOff">("turnOn", "turnOff") }) },
  { weight: 1, arbitrary: fc.constant({ kind: "records-fail-next" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("swap-addresses"), a: m, b: m }) },
);
