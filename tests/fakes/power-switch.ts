import type { CutGuard, PlugAddress, PlugReading, PowerSwitch } from "../../src/domain/index.ts";
import { PlugpoolError } from "../../src/domain/index.ts";

export type PowerOp = "read" | "turnOn" | "turnOff";

/** A persistent fault of one plug: every call fails, or never answers. */
export type PlugFault = "unreachable" | "hang";

export interface PowerCall {
  readonly op: PowerOp;
  readonly plug: PlugAddress;
}

/**
 * A switch command as it reaches the plug: after its wait in the device's queue and, for a switch-off, after
 * the guard allowed it. This is the moment the rules must hold.
 */
export interface Arrival {
  readonly op: "turnOn" | "turnOff";
  readonly plug: PlugAddress;
}

interface Relay {
  on: boolean;
  /** Draw while on; 0 while off. */
  watts: number;
}

/**
 * Relays with real state, keyed by plug URL and switch. Only plugs added with `add` exist; a call to any
 * other plug throws. Every call is logged (and passed to `onCall` at the moment it is made) before any
 * fault applies. Calls to one device wait for each other, and each waits `latency()` turns of the event loop
 * once it has the device (others may act meanwhile). Signals are ignored on purpose: the domain must not rely
 * on a plug honouring them.
 */
export class FakePowerSwitch implements PowerSwitch {
  readonly calls: PowerCall[] = [];
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

  add(plug: PlugAddress, on = false, watts = 80): void {
    this.#relays.set(keyOf(plug), { on, watts });
  }

  /** Flips the relay by hand (someone pressed the button). */
  set(plug: PlugAddress, on: boolean): void {
    this.#relay(plug).on = on;
  }

  isOn(plug: PlugAddress): boolean {
    return this.#relay(plug).on;
  }

  /** The draw the sensor reports while the relay is on. */
  setWatts(plug: PlugAddress, watts: number): void {
    this.#relay(plug).watts = watts;
  }

  setFault(plug: PlugAddress, fault: PlugFault | undefined): void {
    if (fault === undefined) this.#faults.delete(keyOf(plug));
    else this.#faults.set(keyOf(plug), fault);
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

  read(plug: PlugAddress): Promise<PlugReading> {
    return this.#call("read", plug, undefined, () => undefined);
  }

  turnOn(plug: PlugAddress): Promise<PlugReading> {
    return this.#call("turnOn", plug, undefined, (relay) => {
      relay.on = true;
    });
  }

  turnOff(plug: PlugAddress, mayCut: CutGuard): Promise<PlugReading> {
    return this.#call("turnOff", plug, mayCut, (relay) => {
      relay.on = false;
    });
  }

  #call(op: PowerOp, plug: PlugAddress, guard: CutGuard | undefined, act: (r: Relay) => void): Promise<PlugReading> {
    const call = { op, plug };
    this.calls.push(call);
    this.onCall?.(call);
    const relay = this.#relay(plug);
    const fault = this.#faults.get(keyOf(plug));
    if (fault === "hang") return new Promise<PlugReading>(() => undefined);
    const device = plug.device;
    const before = this.#queues.get(device) ?? Promise.resolve();
    const mine = before.then(() => this.#atDevice(op, plug, relay, guard, act));
    this.#queues.set(device, mine.catch(() => undefined));
    return mine;
  }

  async #atDevice(op: PowerOp, plug: PlugAddress, relay: Relay, guard: CutGuard | undefined, act: (r: Relay) => void): Promise<PlugReading> {
    for (let turns = Math.max(1, this.latency()); turns > 0; turns--) await new Promise((r) => setImmediate(r));
    if (this.#faults.get(keyOf(plug)) === "unreachable") throw unreachable(op, plug);
    const next = this.#failNext.get(op)?.shift();
    if (next !== undefined) throw next;
    if (guard !== undefined && !(await guard())) {
      throw new PlugpoolError("unsafe", `turnOff of plug ${plug.url}: refused at the plug by the safety check`);
    }
    if (op !== "read") this.onArrival?.({ op, plug });
    act(relay);
    if (op !== "read" && this.#loseNext.delete(op)) {
      throw new PlugpoolError("plug-unconfirmed", `${op} of plug ${plug.url}: sent, but its answer was lost`);
    }
    const reading = { on: relay.on };
    return plug.powerSensor === undefined ? reading : { ...reading, watts: relay.on ? relay.watts : 0 };
  }

  #relay(plug: PlugAddress): Relay {
    const relay = this.#relays.get(keyOf(plug));
    if (relay === undefined) throw new Error(`the fake has no plug ${plug.url} ${plug.switch}`);
    return relay;
  }
}

function keyOf(plug: PlugAddress): string {
  return `${plug.url}\n${plug.switch}`;
}

function unreachable(op: PowerOp, plug?: PlugAddress): PlugpoolError {
  return new PlugpoolError("plug-unreachable", `${op} of plug ${plug?.url ?? "(next)"}: timed out`);
}
