import type { CutGuard, DeviceCheck, PowerControl, PlugReading, PowerSwitch, ReadOptions, SwitchOptions } from "../../../src/domain/index.ts";
import { PlugpoolError } from "../../../src/domain/index.ts";

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
  /** The key of the control whose machine the device that got it powers (the control's own, unless addresses swapped). */
  readonly device: string;
}

interface Relay {
  on: boolean;
  /** Draw while on; 0 while off. */
  watts: number;
  /** What the device says it is. */
  identity: string;
  /** When (ms, on `now`) it would have booted to tell its uptime: 100 s up when added, 0 at a restart. */
  bootedAt: number;
}

/**
 * Relays with real state, keyed by their control's key. Only plugs added with `add` exist; a call to any
 * other plug throws. Each control's address reaches its own device until `swapAddresses`; a switch command first
 * asks the caller's DeviceCheck with the identity of the device it reached. Every call is logged (and passed to `onCall` at the moment it is made) before any
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
  /** The time the devices tell their uptime by, in whole seconds as ESPHome does (the World's clock). */
  now: () => number = () => 0;
  readonly #queues = new Map<string, Promise<unknown>>();
  #loseNext = new Set<PowerOp>();
  readonly #relays = new Map<string, Relay>();
  /** Which device (the key of the control it was added for) each control's address reaches. */
  readonly #routes = new Map<string, string>();
  readonly #faults = new Map<string, PlugFault>();
  readonly #failNext = new Map<PowerOp, Error[]>();
  readonly #held = new Map<PowerOp, Promise<void>>();

  add(control: PowerControl, on = false, watts = 80): void {
    this.#relays.set(control.key, { on, watts, identity: `device ${control.key}`, bootedAt: this.now() - 100_000 });
  }

  /** The identity the device of `control`'s machine answers with. */
  identityOf(control: PowerControl): string {
    return this.#own(control).identity;
  }

  /** The addresses of two controls now reach each other's device (a DHCP lease handed out anew). */
  swapAddresses(a: PowerControl, b: PowerControl): void {
    const toA = this.#routes.get(a.key) ?? a.key;
    this.#routes.set(a.key, this.#routes.get(b.key) ?? b.key);
    this.#routes.set(b.key, toA);
  }

  /** The device of `control`'s machine is replaced by one that answers as `identity` (relay as it was). */
  replaceDevice(control: PowerControl, identity: string): void {
    this.#own(control).identity = identity;
  }

  /** The device of `control`'s machine restarts: its uptime starts again and its relay comes up `on`. */
  restartDevice(control: PowerControl, on: boolean): void {
    const relay = this.#own(control);
    relay.bootedAt = this.now();
    relay.on = on;
  }

  /** Flips the relay of the machine's own device by hand (someone pressed the button). */
  set(control: PowerControl, on: boolean): void {
    this.#own(control).on = on;
  }

  /** Whether the machine of `control` has power: its own device's relay, whatever its address reaches now. */
  isOn(control: PowerControl): boolean {
    return this.#own(control).on;
  }

  /** The draw the sensor would report now (0 while the relay is off). */
  wattsOf(control: PowerControl): number {
    const relay = this.#own(control);
    return relay.on ? relay.watts : 0;
  }

  /** The draw the sensor of the machine's own device reports while the relay is on. */
  setWatts(control: PowerControl, watts: number): void {
    this.#own(control).watts = watts;
  }

  setFault(control: PowerControl, fault: PlugFault | undefined): void {
    if (fault === undefined) this.#faults.delete(control.key);
    else this.#faults.set(control.key, fault);
  }

  /** The next call of `op` (to any plug) fails with `error`. */
  failNext(op: PowerOp, error: Error = unreachable(op)): void {
    this.#failNext.set(op, [...(this.#failNext.get(op) ?? []), error]);
  }

  /**
   * The next call of `op` (to any plug) waits at its device, before it has any effect, until the returned function
   * is called: a device slower than the caller's deadline.
   */
  holdNext(op: PowerOp): () => void {
    let release = (): void => undefined;
    this.#held.set(op, new Promise<void>((resolve) => (release = resolve)));
    return () => {
      release();
    };
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

  read(control: PowerControl, options?: ReadOptions): Promise<PlugReading> {
    return this.#call("read", control, options?.device === undefined ? {} : { check: options.device }, () => undefined);
  }

  turnOn(control: PowerControl, options: SwitchOptions): Promise<PlugReading> {
    return this.#call("turnOn", control, { check: options.device }, (relay) => {
      relay.on = true;
    });
  }

  turnOff(control: PowerControl, mayCut: CutGuard, options: SwitchOptions): Promise<PlugReading> {
    return this.#call("turnOff", control, { check: options.device, guard: mayCut }, (relay) => {
      relay.on = false;
    });
  }

  /** A BMC's graceful shutdown: accepted by a control that `shutsDown`; what the OS does is the test's. */
  async shutdown(control: PowerControl, mayShutDown: CutGuard, options: SwitchOptions): Promise<void> {
    if (control.shutsDown !== true) throw new Error(`the fake was asked to shut down through ${control.label}, which cannot`);
    await this.#call("shutdown", control, { check: options.device, guard: mayShutDown }, () => undefined);
    this.shutdownsAccepted.push(control.key);
  }

  #call(op: PowerOp, control: PowerControl, asks: Asks, act: (r: Relay) => void): Promise<PlugReading> {
    const call = { op, control };
    this.calls.push(call);
    this.onCall?.(call);
    const reached = this.#routes.get(control.key) ?? control.key;
    const fault = this.#faults.get(control.key);
    if (fault === "hang") return new Promise<PlugReading>(() => undefined);
    const device = this.deviceOf(control);
    const before = this.#queues.get(device) ?? Promise.resolve();
    const mine = before.then(() => this.#atDevice(op, control, reached, asks, act));
    this.#queues.set(device, mine.catch(() => undefined));
    return mine;
  }

  async #atDevice(op: PowerOp, control: PowerControl, reached: string, asks: Asks, act: (r: Relay) => void): Promise<PlugReading> {
    for (let turns = Math.max(1, this.latency()); turns > 0; turns--) await new Promise((r) => setImmediate(r));
    const held = this.#held.get(op);
    if (held !== undefined) {
      this.#held.delete(op);
      await held;
    }
    if (this.#faults.get(control.key) === "unreachable") throw unreachable(op, control);
    const next = this.#failNext.get(op)?.shift();
    if (next !== undefined) throw next;
    const relay = this.#relayOf(reached);
    if (asks.check !== undefined) {
      const uptimeSeconds = Math.floor((this.now() - relay.bootedAt) / 1000);
      if (!(await asks.check({ id: relay.identity, uptimeSeconds }))) {
        throw new PlugpoolError("device-mismatch", `${op} of ${control.label}: the device answered as ${relay.identity}; nothing sent`);
      }
    }
    if (asks.guard !== undefined && !(await asks.guard())) {
      throw new PlugpoolError("unsafe", `${op} of ${control.label}: refused at the plug by the safety check`);
    }
    if (op !== "read") this.onArrival?.({ op, control, device: reached });
    act(relay);
    if (op !== "read" && this.#loseNext.delete(op)) {
      throw new PlugpoolError("plug-unconfirmed", `${op} of ${control.label}: sent, but its answer was lost`);
    }
    const reading = { on: relay.on };
    return !control.measuresWatts ? reading : { ...reading, watts: relay.on ? relay.watts : 0 };
  }

  #own(control: PowerControl): Relay {
    return this.#relayOf(control.key);
  }

  #relayOf(key: string): Relay {
    const relay = this.#relays.get(key);
    if (relay === undefined) throw new Error(`the fake has no device ${key}`);
    return relay;
  }
}

/** What a call asks before it acts, in the device's slot: the DeviceCheck (switch commands), then the guard. */
interface Asks {
  readonly check?: DeviceCheck;
  readonly guard?: CutGuard;
}

function unreachable(op: PowerOp, control?: PowerControl): PlugpoolError {
  return new PlugpoolError("plug-unreachable", `${op} of ${control?.label ?? "(next)"}: timed out`);
}
