import type { CutGuard, PowerControl, PlugReading, PowerSwitch } from "../../src/domain/index.ts";
import { PlugpoolError } from "../../src/domain/index.ts";

export type PowerOp = "read" | "turnOn" | "turnOff" | "shutdown";

/** A persistent fault of one plug: every call fails, or never answers. */
export type PlugFault = "unreachable" | "hang";

export interface PowerCall {
  readonly op: PowerOp;
  readonly control: PowerControl;
}

/**
 * A switch command as it reaches the plug: after its wait in the device's queue and, for a switch-off, after
 * the guard allowed it. This is the moment the rules must hold.
 */
export interface Arrival {
  readonly op: "turnOn" | "turnOff" | "shutdown";
  readonly control: PowerControl;
}

interface Relay {
  on: boolean;
  /** Draw while on; 0 while off. */
  watts: number;
}

/**
 * Relays with real state, keyed by their control's key. Only plugs added with `add` exist; a call to any
 * other plug throws. Every call is logged (and passed to `onCall` at the moment it is made) before any
 * fault applies. Calls to one device wait for each other, and each waits `latency()` turns of the event loop
 * once it has the device (others may act meanwhile). Signals are ignored on purpose: the domain must not rely
 * on a plug honouring them.
 */
export class FakePowerSwitch implements PowerSwitch {
  readonly calls: PowerCall[] = [];
  /** Keys of the controls whose shutdown request was accepted, in order. */
  readonly shutdownsAccepted: string[] = [];
  /** The device a control belongs to (calls to one device wait for each other); default: its own. */
  deviceOf: (control: PowerControl) => string = (control) => control.key;
  /** Runs synchronously at the moment of each call, before it has any effect. */
  onCall: ((call: PowerCall) => void) | undefined;
  /** Runs synchronously when a switch command reaches its plug, just before the relay moves. */
  onArrival: ((arrival: Arrival) => void) | undefined;
  /** Event-loop turns each call spends at its device (default none). */
  latency: () => number = () => 0;
  readonly #queues = new Map<string, Promise<unknown>>();
  #loseNext = new Set<PowerOp>();
  readonly #relays = new Map<string, Relay>();
  readonly #faults = new Map<string, PlugFault>();
  readonly #failNext = new Map<PowerOp, Error[]>();

  add(control: PowerControl, on = false, watts = 80): void {
    this.#relays.set(control.key, { on, watts });
  }

  /** Flips the relay by hand (someone pressed the button). */
  set(control: PowerControl, on: boolean): void {
    this.#relay(control).on = on;
  }

  isOn(control: PowerControl): boolean {
    return this.#relay(control).on;
  }

  /** The draw the sensor would report now (0 while the relay is off). */
  wattsOf(control: PowerControl): number {
    const relay = this.#relay(control);
    return relay.on ? relay.watts : 0;
  }

  /** The draw the sensor reports while the relay is on. */
  setWatts(control: PowerControl, watts: number): void {
    this.#relay(control).watts = watts;
  }

  setFault(control: PowerControl, fault: PlugFault | undefined): void {
    if (fault === undefined) this.#faults.delete(control.key);
    else this.#faults.set(control.key, fault);
  }

  /** The next call of `op` (to any plug) fails with `error`. */
  failNext(op: PowerOp, error: Error = unreachable(op)): void {
    this.#failNext.set(op, [...(this.#failNext.get(op) ?? []), error]);
  }

  /** The next switch command of `op` reaches its plug and acts, but its answer is lost (`plug-unconfirmed`). */
  loseNextAnswer(op: "turnOn" | "turnOff"): void {
    this.#loseNext.add(op);
  }

  /** Every plug answers again: persistent faults and pending one-shot failures are dropped. */
  clearFaults(): void {
    this.#faults.clear();
    this.#failNext.clear();
    this.#loseNext.clear();
  }

  callsOf(op: PowerOp): PowerCall[] {
    return this.calls.filter((c) => c.op === op);
  }

  read(control: PowerControl): Promise<PlugReading> {
    return this.#call("read", control, undefined, () => undefined);
  }

  turnOn(control: PowerControl): Promise<PlugReading> {
    return this.#call("turnOn", control, undefined, (relay) => {
      relay.on = true;
    });
  }

  turnOff(control: PowerControl, mayCut: CutGuard): Promise<PlugReading> {
    return this.#call("turnOff", control, mayCut, (relay) => {
      relay.on = false;
    });
  }

  /** A BMC's graceful shutdown: accepted by a control that `shutsDown`; what the OS does is the test's. */
  async shutdown(control: PowerControl, mayShutDown: CutGuard): Promise<void> {
    if (control.shutsDown !== true) throw new Error(`the fake was asked to shut down through ${control.label}, which cannot`);
    await this.#call("shutdown", control, mayShutDown, () => undefined);
    this.shutdownsAccepted.push(control.key);
  }

  #call(op: PowerOp, control: PowerControl, guard: CutGuard | undefined, act: (r: Relay) => void): Promise<PlugReading> {
    const call = { op, control };
    this.calls.push(call);
    this.onCall?.(call);
    const relay = this.#relay(control);
    const fault = this.#faults.get(control.key);
    if (fault === "hang") return new Promise<PlugReading>(() => undefined);
    const device = this.deviceOf(control);
    const before = this.#queues.get(device) ?? Promise.resolve();
    const mine = before.then(() => this.#atDevice(op, control, relay, guard, act));
    this.#queues.set(device, mine.catch(() => undefined));
    return mine;
  }

  async #atDevice(op: PowerOp, control: PowerControl, relay: Relay, guard: CutGuard | undefined, act: (r: Relay) => void): Promise<PlugReading> {
    for (let turns = Math.max(1, this.latency()); turns > 0; turns--) await new Promise((r) => setImmediate(r));
    if (this.#faults.get(control.key) === "unreachable") throw unreachable(op, control);
    const next = this.#failNext.get(op)?.shift();
    if (next !== undefined) throw next;
    if (guard !== undefined && !(await guard())) {
      throw new PlugpoolError("unsafe", `${op} of ${control.label}: refused at the plug by the safety check`);
    }
    if (op !== "read") this.onArrival?.({ op, control });
    act(relay);
    if (op !== "read" && this.#loseNext.delete(op)) {
      throw new PlugpoolError("plug-unconfirmed", `${op} of ${control.label}: sent, but its answer was lost`);
    }
    const reading = { on: relay.on };
    return !control.measuresWatts ? reading : { ...reading, watts: relay.on ? relay.watts : 0 };
  }

  #relay(control: PowerControl): Relay {
    const relay = this.#relays.get(control.key);
    if (relay === undefined) throw new Error(`the fake has no ${control.label}`);
    return relay;
  }
}

function unreachable(op: PowerOp, control?: PowerControl): PlugpoolError {
  return new PlugpoolError("plug-unreachable", `${op} of ${control?.label ?? "(next)"}: timed out`);
}
