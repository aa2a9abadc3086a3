// One public call of a backend's switch: bounded by the backend's timeout, its wait behind other calls to the
// same device included, ended early by the caller's signal, and failing with a PlugpoolError made here alone,
// from plugpool's own words (see device-failure.ts).
import { isPlugpoolError, PlugpoolError } from "../../domain/errors.ts";
import type { CallOptions, CutGuard, DeviceCheck, DeviceIdentity } from "../../domain/ports.ts";
import { askDevice, askGuard, CutRefused, DeviceRefused } from "../cut-guard.ts";
import { started } from "./started.ts";
import { causeOf, describeFailure, type FailureContext, type VendorFailure } from "./device-failure.ts";

/** What a call's work is given. */
export interface DeviceCall<Target> extends FailureContext {
  /** Aborts on the deadline or the caller's abort, whichever comes first. */
  readonly signal: AbortSignal;
  /** What the backend's client needs to reach the device, made once per call. */
  readonly target: Target;
  /** A command was handed to the HTTP client and not refused: from here on its outcome may be unknown. */
  commandSent: boolean;
}

export interface CallRules<Control, Target> {
  /** Bound on each call, including its wait behind other calls to the same device. */
  readonly timeoutMs: number;
  readonly target: (control: Control) => Target;
  /** What was attempted on what, first in every message: "turning off plug http://plug-1.local switch "Relay"". */
  readonly where: (control: Control, action: string) => string;
  /** What follows `where` when the cut guard said no, e.g. "the switch-off was refused at the plug by the safety check". */
  readonly unsafe: string;
  /** The command in "…; the command was sent and its outcome is unknown". */
  readonly command: string;
  readonly vendorFailure?: VendorFailure;
}

/** Runs `work` on `control` as one call; every failure leaves as a PlugpoolError. */
export type BoundedCall<Control, Target> = <T>(
  control: Control,
  action: string,
  options: CallOptions | undefined,
  work: (call: DeviceCall<Target>) => Promise<T>,
) => Promise<T>;

/**
 * The reason of every deadline's abort. A device that does not answer is the expected case at every Refresh, so
 * its path builds no other error: the deadline aborts with this one reason (not the DOMException
 * AbortSignal.timeout makes each time), which the HTTP client hands on as the request's error.
 */
const TIMED_OUT: Error = new DOMException("the device call timed out", "TimeoutError");

/**
 * The calls waiting on each caller's signal, heard through one listener per signal. A Refresh hands its RPC's
 * signal to every plug read at once, and EventTarget looks through all of a signal's listeners at each add and
 * remove, so one listener per call would cost time quadratic in the machines.
 */
const waitingOn = new WeakMap<AbortSignal, Set<() => void>>();

function onCallerAbort(signal: AbortSignal, listener: () => void): void {
  const known = waitingOn.get(signal);
  if (known !== undefined) {
    known.add(listener);
    return;
  }
  const waiting = new Set([listener]);
  waitingOn.set(signal, waiting);
  signal.addEventListener("abort", () => {
    waitingOn.delete(signal);
    for (const abort of waiting) abort();
  }, { once: true });
}

function offCallerAbort(signal: AbortSignal, listener: () => void): void {
  waitingOn.get(signal)?.delete(listener);
}

/** The calls asked for in one synchronous pass: when, and how many of them started then. */
interface Pass {
  /**
   * A Refresh asks for every plug's read in one pass, and setting up each request takes the CPU a while (tens of
   * milliseconds for hundreds of plugs on a slow machine): counted from the pass, a call's bound includes that
   * wait too, and every read of a Refresh ends by one deadline, not by a deadline that drifts with the number of
   * plugs.
   */
  readonly askedAt: number;
  started: number;
}

let pass: Pass | undefined;

function currentPass(): Pass {
  if (pass === undefined) {
    pass = { askedAt: performance.now(), started: 0 };
    queueMicrotask(() => { pass = undefined; });
  }
  return pass;
}

/** At most this many calls start in one pass; the others wait in `deferred`, oldest first. */
const PASS_BATCH = 20;
const deferred: (() => void)[] = [];

/**
 * Runs `start` now when fewer than PASS_BATCH calls of `asked` started and none wait, else in a later turn of the
 * event loop, PASS_BATCH at a time, in the order asked. A Refresh asks every plug at once: set up in one pass,
 * hundreds of requests are all still in flight at every young-generation collection that pass triggers, so each
 * is copied, moved to the old generation and freed only by a full collection; set up in batches, the answers to
 * one batch are read, and its objects die young, before the next batch is set up. The gRPC server and the
 * cluster watches are served between batches too.
 */
function startSoon(asked: Pass, start: () => void): void {
  if (deferred.length === 0 && asked.started < PASS_BATCH) {
    asked.started++;
    start();
    return;
  }
  if (deferred.push(start) === 1) setImmediate(startDeferred);
}

function startDeferred(): void {
  for (const start of deferred.splice(0, PASS_BATCH)) start();
  if (deferred.length > 0) setImmediate(startDeferred);
}

export function createBoundedCall<Control, Target>(rules: CallRules<Control, Target>): BoundedCall<Control, Target> {
  function callError(where: string, error: unknown, call: DeviceCall<Target>): PlugpoolError {
    if (error instanceof CutRefused) return new PlugpoolError("unsafe", `${where}: ${rules.unsafe}`, causeOf(error.cause));
    if (error instanceof DeviceRefused) return new PlugpoolError("device-mismatch", `${where}: ${mismatch(error)}`, causeOf(error.cause));
    if (isPlugpoolError(error) && error.code === "not-leader") return new PlugpoolError("not-leader", `${where}: ${error.message}; nothing was sent`);
    const { code, detail, cause } = describeFailure(error, call);
    if (call.commandSent && code !== "plug-unconfirmed") {
      return new PlugpoolError("plug-unconfirmed", `${where}: ${detail}; ${rules.command} was sent and its outcome is unknown`, causeOf(cause));
    }
    return new PlugpoolError(code, `${where}: ${detail}`, causeOf(cause));
  }

  // Chained, not awaited (see started.ts).
  return <T>(control: Control, action: string, options: CallOptions | undefined, work: (call: DeviceCall<Target>) => Promise<T>): Promise<T> => {
    const asked = currentPass();
    // One controller for the deadline and the caller's abort, whichever comes first; its reason tells them apart.
    const controller = new AbortController();
    const { signal } = controller;
    const callerSignal = options?.signal;
    const abortCall = (): void => { controller.abort(callerSignal?.reason); };
    if (callerSignal?.aborted === true) abortCall();
    else if (callerSignal !== undefined) onCallerAbort(callerSignal, abortCall);
    // At least half the timeout all the same: a pass that ran long must not end a call before it could try.
    const timer = setTimeout(() => { controller.abort(TIMED_OUT); }, Math.max(rules.timeoutMs / 2, rules.timeoutMs - (performance.now() - asked.askedAt)));
    const call: DeviceCall<Target> = {
      signal,
      timedOut: () => signal.reason === TIMED_OUT,
      callerSignal,
      timeoutMs: rules.timeoutMs,
      vendorFailure: rules.vendorFailure,
      target: rules.target(control),
      commandSent: false,
    };
    const end = (): void => {
      clearTimeout(timer);
      if (callerSignal !== undefined) offCallerAbort(callerSignal, abortCall);
    };
    // The deadline already runs: a call that waits for its turn to start waits within its timeout.
    return new Promise<T>((resolve) => { startSoon(asked, () => { resolve(started(() => work(call))); }); }).then(
      (value) => {
        end();
        return value;
      },
      (error: unknown) => {
        end();
        throw callError(rules.where(control, action), error, call);
      },
    );
  };
}

/** How a device is asked what it is: `identify` reads what it says it is (in the call's slot), `check` is asked with it. */
export interface DeviceQuestion {
  readonly identify: () => Promise<DeviceIdentity>;
  readonly check: DeviceCheck;
}

/**
 * How a command's device is confirmed: by asking it, or not at all, where the address is the device's identity
 * (a hub's entity id).
 */
export type DeviceConfirmation = DeviceQuestion | "address is identity";

/**
 * Awaited right before each sending of a command's request, with the device's slot held and nothing else awaited
 * until the request is handed to the HTTP client: hears the device say what it is and asks the device check, then
 * asks `mayCut`, when given, last, so nothing reaches the device between their yes and the request; and counts the
 * command as sent once nothing more can stop it.
 */
export async function readyToSend(call: DeviceCall<unknown>, device: DeviceConfirmation, mayCut?: CutGuard): Promise<void> {
  call.commandSent = false; // sent again only after the device refused it (a 401, a 404 for one URL spelling)
  if (device !== "address is identity") await askDevice(device.check, await device.identify(), "command", call.signal);
  if (mayCut) await askGuard(mayCut, call.signal);
  call.signal.throwIfAborted(); // nothing is sent once aborted; the command must not count as sent
  call.commandSent = true;
}

/**
 * Awaited before a checked read's state request, with the device's slot held so nothing else reaches the device
 * between: hears the device say what it is and asks the device check. A refusal ends the call as
 * `device-mismatch`, and no state is read: a reading that stands in for a cut is as checked as the cut.
 */
export async function readyToRead(call: DeviceCall<unknown>, device: DeviceQuestion): Promise<void> {
  await askDevice(device.check, await device.identify(), "read", call.signal);
}

/** The longest identity a message shows: it is the device's own text. */
const SHOWN_IDENTITY = 120;

/** What follows `where` when the device check refused: what the device answered as, capped. */
function mismatch(error: DeviceRefused): string {
  const { id } = error.seen;
  const seen = id.length > SHOWN_IDENTITY ? `${id.slice(0, SHOWN_IDENTITY)}…` : id;
  const why = error.failed ? "which could not be checked against the device expected there" : "not as the device expected there";
  return `the device answers as ${seen}, ${why}; ${error.before === "read" ? "no state was taken from it" : "nothing was sent"}`;
}
