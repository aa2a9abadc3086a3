// plugpool's own leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it
// (https://pkg.go.dev/k8s.io/client-go/tools/leaderelection): take the Lease when it is free or its holder let
// it lapse, renew it every retry period, and write it only with the resourceVersion it was read at, so that of
// two writers one gets 409 Conflict and loses.
//
// This process acts only while its last successful renew is younger than the renew deadline, measured with
// performance.now() from when that renew was SENT. Another instance takes the Lease only once it has seen no
// change to it for the lease duration, which is longer: a process that cannot renew (partitioned, frozen, its
// apiserver down) stops acting at least `leaseDuration - renewDeadline` (5 s by default) before anyone else can
// start. The one exposure left: an act that passed its last check just before the process froze goes out when
// it wakes. Each act is checked right before its request, so that request is all that can go out; a plug
// request is bounded by the plug timeout (at most 4 s), a cluster write by its own (10 s).
import { setTimeout as sleep } from "node:timers/promises";
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from "@kubernetes/client-node";
import type { Leadership } from "../../domain/ports.ts";
import { callBound, callOptions, statusOf, type CallBound } from "./api-errors.ts";

/** client-go's defaults (and cluster-autoscaler's): the renew deadline is shorter than the lease. */
export interface LeaseTiming {
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
}

export const DEFAULT_LEASE_TIMING: LeaseTiming = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

/** A device command is sent right after its last acting check, and ends within its timeout; the default lease allows 4 s. */
const COVERED_COMMAND_MS = 4_000;

/**
 * The timing under which a command sent just before this instance stopped acting has ended (its device timeout)
 * before another instance can start: the lease outlasts the renew deadline by the longest device timeout in use,
 * and by a second more. Devices of 4 s or less keep client-go's defaults.
 */
export function leaseTimingFor(longestDeviceTimeoutMs: number): LeaseTiming {
  const extra = Math.max(0, longestDeviceTimeoutMs - COVERED_COMMAND_MS);
  return { ...DEFAULT_LEASE_TIMING, leaseDurationMs: DEFAULT_LEASE_TIMING.leaseDurationMs + Math.ceil(extra / 1000) * 1000 };
}

export interface LeaseRef {
  readonly namespace: string;
  readonly name: string;
}

export interface LeaderLeaseOptions {
  /** plugpool's own Lease. */
  readonly lease: LeaseRef;
  /** This process in the Lease's holderIdentity: its pod's name and a suffix of its own. */
  readonly identity: string;
  /**
   * cluster-autoscaler's Lease, when it runs leader-elected: contend only while it is held by `hostname` (the CA
   * in this pod: cluster-autoscaler's identity is its hostname, which the containers of a pod share), and give
   * plugpool's Lease up when it is not, reading it all the same. A missing Lease means a CA that does not elect:
   * contend.
   */
  readonly followAutoscaler?: LeaseRef & { readonly hostname: string };
  readonly timing?: LeaseTiming;
  /** Each failed attempt (it is retried every retry period). */
  readonly onError?: (error: unknown) => void;
  /** Called when this process starts (true) or stops (false) acting. */
  readonly onChange?: (acting: boolean) => void;
}

export interface LeaderLease extends Leadership {
  /** Starts contending; resolves once the first attempt ended (this process acts, or knows it does not yet). */
  start(): Promise<void>;
  /** Stops contending; gives the Lease up (holder cleared) when this process holds it, so another takes it at once. */
  stop(): Promise<void>;
  /** Counts the times this process started acting: an act of an earlier term must not go on in a later one. */
  term(): number;
}

interface Observed {
  readonly resourceVersion: string;
  readonly holder: string;
  readonly durationMs: number;
  /** performance.now() when this version was first seen. */
  readonly at: number;
}

/** One elector's memory and wiring. */
interface Elector {
  readonly api: CoordinationV1Api;
  readonly options: LeaderLeaseOptions;
  readonly timing: LeaseTiming;
  /** Aborts the loop's requests and waits. */
  readonly stopping: AbortController;
  /** performance.now() when the last successful renew was sent. */
  renewedAt?: number;
  /** When this process took the Lease (kept in the Lease while it renews). */
  acquiredAt?: V1MicroTime;
  observed?: Observed;
  term: number;
  /** What the owner was last told (onChange). */
  told: boolean;
  lapseTimer?: NodeJS.Timeout;
}

export function createLeaderLease(kc: KubeConfig, options: LeaderLeaseOptions): LeaderLease {
  const e: Elector = {
    api: kc.makeApiClient(CoordinationV1Api),
    options,
    timing: options.timing ?? DEFAULT_LEASE_TIMING,
    stopping: new AbortController(),
    term: 0,
    told: false,
  };
  const onError = options.onError ?? (() => undefined);
  let loop: Promise<void> | undefined;
  return {
    acting: () => acting(e),
    holder: () => {
      const holder = e.observed?.holder;
      return acting(e) || holder === undefined || holder === "" || holder === options.identity ? undefined : holder;
    },
    term: () => e.term,
    start() {
      const first = Promise.withResolvers<undefined>();
      loop ??= run(e, onError, () => {
        first.resolve(undefined);
      });
      return first.promise;
    },
    async stop() {
      e.stopping.abort();
      await loop;
      // The loop's signal has aborted: the release gets a bound of its own.
      await release(e, () => callBound(requestMs(e))).catch(onError);
    },
  };
}

function acting(e: Elector): boolean {
  return e.renewedAt !== undefined && performance.now() - e.renewedAt < e.timing.renewDeadlineMs;
}

/** Tells the owner when acting changed since it was last told. */
function tell(e: Elector): void {
  const now = acting(e);
  if (now === e.told) return;
  e.told = now;
  e.options.onChange?.(now);
}

/** A successful renew sent at `sentAt`; after a lapse it starts a new term, and the owner hears of both. */
function renewed(e: Elector, sentAt: number): void {
  if (!acting(e)) {
    e.term++;
    // A lapse the owner was not told of yet (the timer had not fired): the last term ended all the same.
    if (e.told) {
      e.told = false;
      e.options.onChange?.(false);
    }
  }
  e.renewedAt = sentAt;
  armLapse(e);
  tell(e);
}

// Acting ends by the clock alone; the timer only tells the owner, at the moment it ends. A timer may fire a
// little before performance.now() says the deadline passed: then it waits out the rest.
function armLapse(e: Elector): void {
  clearTimeout(e.lapseTimer);
  if (e.renewedAt === undefined) return;
  const left = e.renewedAt + e.timing.renewDeadlineMs - performance.now();
  e.lapseTimer = setTimeout(() => {
    if (acting(e)) armLapse(e);
    else tell(e);
  }, Math.max(0, Math.ceil(left)) + 1);
}

function lost(e: Elector): void {
  delete e.renewedAt;
  delete e.acquiredAt;
  clearTimeout(e.lapseTimer);
  tell(e);
}

const requestMs = (e: Elector): number => Math.max(1, e.timing.renewDeadlineMs / 2);
const bound = (e: Elector): CallBound => callBound(requestMs(e), e.stopping.signal);
const where = (ref: LeaseRef): string => `Lease ${ref.namespace}/${ref.name}`;

// A function, not the property: stop() may abort during any await.
const stopped = (e: Elector): boolean => e.stopping.signal.aborted;

async function run(e: Elector, onError: (error: unknown) => void, firstDone: () => void): Promise<void> {
  while (!stopped(e)) {
    try {
      if (await autoscalerHere(e)) await acquireOrRenew(e);
      else await standAside(e);
    } catch (error) {
      if (!stopped(e)) onError(error);
    }
    firstDone();
    await sleep(e.timing.retryPeriodMs, undefined, { signal: e.stopping.signal }).catch(() => undefined);
  }
}

/** Whether cluster-autoscaler's Lease lets this process contend (see followAutoscaler). */
async function autoscalerHere(e: Elector): Promise<boolean> {
  const follow = e.options.followAutoscaler;
  if (follow === undefined) return true;
  const lease = await read(e.api, follow, bound(e));
  return lease === undefined || lease.spec?.holderIdentity === follow.hostname;
}

async function acquireOrRenew(e: Elector): Promise<void> {
  const lease = await read(e.api, e.options.lease, bound(e));
  const seen = observe(e, lease);
  const identity = e.options.identity;
  if (seen !== undefined && seen.holder !== "" && seen.holder !== identity && performance.now() < seen.at + seen.durationMs) {
    lost(e);
    return;
  }
  const sentAt = performance.now();
  const wall = new Date();
  const written = await write(e, lease, identity, wall, bound(e));
  if (written === undefined) {
    lost(e);
    return;
  }
  if (lease?.spec?.holderIdentity !== identity || e.acquiredAt === undefined) e.acquiredAt = new V1MicroTime(wall.getTime());
  observe(e, written);
  renewed(e, sentAt);
}

/**
 * Passive while the CA in this pod does not lead: gives plugpool's Lease up if held, and goes on reading it, so
 * that refusals to CA name the pod that acts, and a holder that stopped renewing is seen to lapse from now on,
 * not only once this CA leads.
 */
async function standAside(e: Elector): Promise<void> {
  await release(e, () => bound(e));
  observe(e, await read(e.api, e.options.lease, bound(e)));
}

/** Gives the Lease up if this process holds it: acting ends first, then the holder is cleared. */
async function release(e: Elector, limits: () => CallBound): Promise<void> {
  const held = e.renewedAt !== undefined;
  lost(e);
  if (!held) return;
  const lease = await read(e.api, e.options.lease, limits());
  if (lease?.spec?.holderIdentity === e.options.identity) observe(e, await write(e, lease, "", new Date(), limits()));
}

/** The Lease as last seen, with when this process first saw that version (another's lapse counts from it). */
function observe(e: Elector, lease: V1Lease | undefined): Observed | undefined {
  if (lease === undefined) return (e.observed = undefined);
  const resourceVersion = lease.metadata?.resourceVersion ?? "";
  if (e.observed?.resourceVersion !== resourceVersion) {
    const seconds = lease.spec?.leaseDurationSeconds;
    e.observed = {
      resourceVersion,
      holder: lease.spec?.holderIdentity ?? "",
      durationMs: seconds === undefined ? e.timing.leaseDurationMs : seconds * 1000,
      at: performance.now(),
    };
  }
  return e.observed;
}

async function read(api: CoordinationV1Api, ref: LeaseRef, limits: CallBound): Promise<V1Lease | undefined> {
  try {
    return await api.readNamespacedLease({ ...ref }, callOptions({ signal: limits.signal }));
  } catch (error) {
    if (statusOf(error) === 404) return undefined;
    throw limits.error(`reading ${where(ref)}`, error);
  }
}

/** Creates or replaces plugpool's Lease, held by `holder` ("" gives it up); undefined when another writer came first. */
async function write(e: Elector, current: V1Lease | undefined, holder: string, wall: Date, limits: CallBound): Promise<V1Lease | undefined> {
  const ref = e.options.lease;
  const mine = current?.spec?.holderIdentity === e.options.identity && holder === e.options.identity;
  const transitions = current?.spec?.leaseTransitions ?? 0;
  const body: V1Lease = {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    // The resourceVersion it was read at: a write made meanwhile by another makes this one fail with 409.
    metadata: { name: ref.name, namespace: ref.namespace, ...(current && { resourceVersion: current.metadata?.resourceVersion }) },
    spec: {
      holderIdentity: holder,
      leaseDurationSeconds: Math.ceil(e.timing.leaseDurationMs / 1000),
      acquireTime: mine && e.acquiredAt ? e.acquiredAt : new V1MicroTime(wall.getTime()),
      renewTime: new V1MicroTime(wall.getTime()),
      leaseTransitions: mine || holder === "" || current === undefined ? transitions : transitions + 1,
    },
  };
  try {
    const call = callOptions({ signal: limits.signal });
    return await (current === undefined
      ? e.api.createNamespacedLease({ namespace: ref.namespace, body }, call)
      : e.api.replaceNamespacedLease({ ...ref, body }, call));
  } catch (error) {
    if (statusOf(error) === 409) return undefined;
    throw limits.error(`writing ${where(ref)}`, error);
  }
}
